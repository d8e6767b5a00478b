/* gpuforge test stand-in for nccl-tests' common.h: the stand-in build checks for the headers the real one
   includes (nccl.h, cuda_runtime.h); see common.cu. */
#include <nccl.h>
#include <cuda_runtime.h>
