# Per-exercise options of day 10 (see cmake/CourseExercises.cmake, course_exercise_options).
# 04: nvcuda::wmma needs tensor cores (sm_70, Volta, or newer).
course_exercise_options(04_fp16_wmma MIN_SM 70)
# 05: mma.sync with bf16 operands, ldmatrix and cp.async need Ampere (sm_80) or newer.
course_exercise_options(05_fp16_mma MIN_SM 80)
# 09: the backward pass on mma.sync (bf16 operands), ldmatrix and cp.async need Ampere (sm_80) or newer.
course_exercise_options(09_fp16_mma_backward MIN_SM 80)
# 10: wgmma and setmaxnreg exist only in the architecture-specific target sm_90a (Hopper); TMA
# and mbarrier transaction counts need sm_90. Built for 90a-real alone; other GPUs skip.
course_exercise_options(10_hopper_wgmma MIN_SM 90 ARCH_SPECIFIC 90a)
# 11: the Hopper backward: wgmma, TMA, bulk copies and setmaxnreg, as 10 (sm_90a only).
course_exercise_options(11_hopper_backward MIN_SM 90 ARCH_SPECIFIC 90a)
# 12: ring attention. The local kernel is given code (ring_local_attention), picked per GPU at run
# time: exercise 10's solution on sm_90 where this build compiles it (90 in COURSE_CUDA_ARCH:
# USES_OPTIONAL links it and defines COURSE_HAVE_10_HOPPER_WGMMA), else exercise 05's, which every
# implementation links; NCCL moves the K/V blocks between GPUs. One GPU runs a ring of 1; the entries
# solution_2gpu / solution_4gpu (and each wrong variant's) run rings of 2 and 4 GPUs and are
# Skipped where fewer exist. A send/recv order that deadlocks (recv_before_send) needs two ranks
# to show: it has multi-GPU entries only.
course_exercise_options(12_ring_attention MIN_SM 80 USES 05_fp16_mma USES_OPTIONAL 10_hopper_wgmma NCCL GPU_COUNTS 2 4
                        MULTI_GPU_ONLY recv_before_send)
