// The exercise launchers this binary was linked with. BENCH_HAVE_<id> is defined by
// bench/CMakeLists.txt for each exercise whose implementation library exists, so the bench
// builds at every stage of the course (and for the learner's build, with only one exercise).
#pragma once

#ifdef BENCH_HAVE_01_vector_add
#include "01_vector_add.h"
#endif
#ifdef BENCH_HAVE_02_matmul
#include "02_matmul.h"
#endif
#ifdef BENCH_HAVE_03_reduction
#include "03_reduction.h"
#endif
#ifdef BENCH_HAVE_04_softmax
#include "04_softmax.h"
#endif
#ifdef BENCH_HAVE_01_naive_attention
#include "01_naive_attention.h"
#endif
#ifdef BENCH_HAVE_02_flash_attention
#include "02_flash_attention.h"
#endif
#ifdef BENCH_HAVE_03_gqa_attention
#include "03_gqa_attention.h"
#endif
#ifdef BENCH_HAVE_04_paged_attention
#include "04_paged_attention.h"
#endif
