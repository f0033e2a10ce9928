// The source of `spin.ptx`, the CUDA driver's kernel for `tiles` work (and for `spin` and
// `sleep` kernels): every block busy-waits on the global nanosecond timer until `duration_ns`
// has passed since it started, so a grid of `tiles` blocks stands for `tiles` tiles of that
// much work each. The PTX beside it is written to match this source instruction for
// instruction (no CUDA compiler is needed to build the driver); to regenerate it:
//
//     nvcc -arch=sm_70 -ptx spin.cu -o spin.ptx
//
// (nvcc names its registers differently; the loop is the same).

extern "C" __global__ void causeway_spin(unsigned long long duration_ns)
{
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start >= duration_ns) {
            break;
        }
    }
}
