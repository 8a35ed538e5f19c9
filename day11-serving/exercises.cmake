# Per-exercise options of day 11 (see cmake/CourseExercises.cmake, course_exercise_options).
# 01 and 02 are the engine's bookkeeping, plain C++ on the host: they build and run everywhere.
course_exercise_options(01_kv_block_manager CPU_ONLY)
# 02's scheduler reserves pages through 01's block manager (its solution, given code).
course_exercise_options(02_batch_scheduler CPU_ONLY USES 01_kv_block_manager)
# 03: 16-byte vector loads of fp16/bf16 and bf16 arithmetic need sm_80 or newer.
course_exercise_options(03_fused_add_rmsnorm MIN_SM 80)
