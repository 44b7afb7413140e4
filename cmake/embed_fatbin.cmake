# Writes the fatbin IN as the byte array of device/gpu_kernels.h into OUT.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "// Generated from gpu_kernels.fatbin by cmake/embed_fatbin.cmake.\n#include \"device/gpu_kernels.h\"\n\nnamespace stoker {\n\n// 8-byte aligned: the driver reads the fatbin's header in place.\nalignas(8) const unsigned char kGpuKernelsFatbin[] = {${bytes}};\nconst size_t kGpuKernelsFatbinSize = ${size};\n\n}  // namespace stoker\n")
