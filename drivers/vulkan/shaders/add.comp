#version 450
// c[i] = a[i] + b[i] over one tile: the descriptors bind the tile's own range of each buffer,
// so element 0 here is the tile's first element; `count` is the tile's length.
layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };

layout(push_constant) uniform Tile {
    uint count;
    float scalar;
} tile;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < tile.count) {
        c[i] = a[i] + b[i];
    }
}
