; The source of `compute.ptx`: the CUDA driver's kernels for `compute` work, in LLVM IR.
;
; Each kernel walks its elements with a grid-stride loop: thread t of block b starts at element
; b * blockDim + t and steps by gridDim * blockDim, so a grid of any size covers all `n`.
;
; - causeway_add(x, y, out, n):    out[i] = x[i] + y[i]
; - causeway_saxpy(a, x, out, n):  out[i] = out[i] + a * x[i]   (one region of saxpy work)
;
; The PTX beside it is what LLVM's NVPTX backend makes of this file (no CUDA toolkit needed);
; the driver's `kernels` test regenerates it and fails if the two differ:
;
;     llc -march=nvptx64 -mcpu=sm_70 -O2 compute.ll -o compute.ptx

target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()

define void @causeway_add(float addrspace(1)* %x, float addrspace(1)* %y, float addrspace(1)* %out, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %block = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %threads = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %blocks = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %first = mul i32 %block, %threads
  %start = add i32 %first, %tid
  %stride = mul i32 %threads, %blocks
  br label %check

check:
  %i = phi i32 [ %start, %entry ], [ %next, %body ]
  %more = icmp ult i32 %i, %n
  br i1 %more, label %body, label %done

body:
  %index = zext i32 %i to i64
  %x.at = getelementptr inbounds float, float addrspace(1)* %x, i64 %index
  %y.at = getelementptr inbounds float, float addrspace(1)* %y, i64 %index
  %out.at = getelementptr inbounds float, float addrspace(1)* %out, i64 %index
  %x.value = load float, float addrspace(1)* %x.at, align 4
  %y.value = load float, float addrspace(1)* %y.at, align 4
  %sum = fadd float %x.value, %y.value
  store float %sum, float addrspace(1)* %out.at, align 4
  %next = add i32 %i, %stride
  br label %check

done:
  ret void
}

define void @causeway_saxpy(float %a, float addrspace(1)* %x, float addrspace(1)* %out, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %block = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %threads = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %blocks = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %first = mul i32 %block, %threads
  %start = add i32 %first, %tid
  %stride = mul i32 %threads, %blocks
  br label %check

check:
  %i = phi i32 [ %start, %entry ], [ %next, %body ]
  %more = icmp ult i32 %i, %n
  br i1 %more, label %body, label %done

body:
  %index = zext i32 %i to i64
  %x.at = getelementptr inbounds float, float addrspace(1)* %x, i64 %index
  %out.at = getelementptr inbounds float, float addrspace(1)* %out, i64 %index
  %x.value = load float, float addrspace(1)* %x.at, align 4
  %out.value = load float, float addrspace(1)* %out.at, align 4
  %scaled = fmul float %a, %x.value
  %sum = fadd float %out.value, %scaled
  store float %sum, float addrspace(1)* %out.at, align 4
  %next = add i32 %i, %stride
  br label %check

done:
  ret void
}

!nvvm.annotations = !{!0, !1}
!0 = !{void (float addrspace(1)*, float addrspace(1)*, float addrspace(1)*, i32)* @causeway_add, !"kernel", i32 1}
!1 = !{void (float, float addrspace(1)*, float addrspace(1)*, i32)* @causeway_saxpy, !"kernel", i32 1}
