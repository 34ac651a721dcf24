/* kiln_rt: runs a model exported by kiln::export_model (or `kiln export`) without the
 * compiler. A plain C API over libkiln_rt.so; kiln_rt.hpp wraps it for C++.
 *
 *   kiln_rt_model* model = kiln_rt_load("fashion.kiln");
 *   if (!model) { fprintf(stderr, "%s\n", kiln_rt_last_error()); return 1; }
 *   int64_t shape[4] = {batch, 1, 28, 28};
 *   kiln_rt_tensor x = {pixels, KILN_RT_FLOAT32, 4, shape};
 *   kiln_rt_outputs* out = kiln_rt_run(model, &x, 1);
 *   if (!out) { fprintf(stderr, "%s\n", kiln_rt_last_error()); ... }
 *   const kiln_rt_tensor* logits = kiln_rt_outputs_get(out, 0);   // float32[batch, 10]
 *   ...
 *   kiln_rt_outputs_free(out);
 *   kiln_rt_free(model);
 *
 * Loading checks the manifest (format version, this CPU's features, the SHA-256 of every
 * file) before any of the artifact's code is loaded. Running checks every input against the
 * artifact's signature (dtype, rank, static dims, the range of dynamic dims) and refuses a
 * mismatch with a message naming the input, what the artifact expects and what it got.
 * Functions that can fail return NULL (or -1) and leave the reason in kiln_rt_last_error().
 *
 * Thread safety: one loaded model may be run from several threads at once. The error
 * message is per thread. */
#ifndef KILN_RT_H
#define KILN_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_RT_API __attribute__((visibility("default")))

/* Element types; the values are part of the ABI. */
typedef enum kiln_rt_dtype {
  KILN_RT_BOOL = 0, /* one byte, 0 or 1 */
  KILN_RT_INT32 = 1,
  KILN_RT_INT64 = 2,
  KILN_RT_FLOAT16 = 3,
  KILN_RT_BFLOAT16 = 4,
  KILN_RT_FLOAT32 = 5,
  KILN_RT_FLOAT64 = 6
} kiln_rt_dtype;

/* A dense, row-major (C order) array. Inputs are read, never written or kept past the
 * call. */
typedef struct kiln_rt_tensor {
  void* data;
  int32_t dtype; /* a kiln_rt_dtype (an int32_t: any value a caller stores is defined) */
  int32_t rank;
  const int64_t* shape; /* rank sizes */
} kiln_rt_tensor;

typedef struct kiln_rt_model kiln_rt_model;
typedef struct kiln_rt_outputs kiln_rt_outputs;

/* Loads the artifact directory `dir`. NULL on failure (see kiln_rt_last_error). */
KILN_RT_API kiln_rt_model* kiln_rt_load(const char* dir);
/* Releases a model (NULL is allowed). No run may be in progress. */
KILN_RT_API void kiln_rt_free(kiln_rt_model* model);

/* Runs the model on `input_count` inputs, in the order of the signature. Returns the
 * outputs (owned by the caller: kiln_rt_outputs_free), or NULL on failure. */
KILN_RT_API kiln_rt_outputs* kiln_rt_run(kiln_rt_model* model, const kiln_rt_tensor* inputs,
                                         size_t input_count);
/* A GPU model (kiln_rt_device says "cuda") on data already in GPU 0's memory, with no copies
 * through the host. Every input's `data` is a device pointer on GPU 0 (cudaMalloc, cuMemAlloc,
 * another framework's tensor, an earlier call's output); host memory is refused, as a device
 * pointer is by kiln_rt_run. The outputs' `data` are device pointers on GPU 0, owned by the
 * caller until kiln_rt_outputs_free (never the memory of an input or a weight).
 *
 * The work is queued on `stream` (a CUstream or cudaStream_t; NULL: the default stream) after
 * what is already queued there, and the call returns without waiting: the inputs must stay
 * valid, and the outputs may be read, once the stream's work has run (cudaStreamSynchronize)
 * or by work queued on the same stream. kiln_rt_outputs_free hands the memory back to kiln,
 * which reuses it for its work queued later on that same stream: free the outputs once what
 * reads them is queued on `stream`, or after it has run. A CPU model refuses the call. */
KILN_RT_API kiln_rt_outputs* kiln_rt_run_on_device(kiln_rt_model* model,
                                                   const kiln_rt_tensor* inputs,
                                                   size_t input_count, void* stream);
KILN_RT_API size_t kiln_rt_outputs_count(const kiln_rt_outputs* outputs);
/* Output `index` (dense, row-major), valid until kiln_rt_outputs_free; NULL when out of
 * range. */
KILN_RT_API const kiln_rt_tensor* kiln_rt_outputs_get(const kiln_rt_outputs* outputs, size_t index);
KILN_RT_API void kiln_rt_outputs_free(kiln_rt_outputs* outputs);

/* Why the latest failing call on this thread failed ("" when none has, or when the latest
 * call that can fail succeeded). The text lives in this thread's storage: the pointer stays
 * valid until the next kiln_rt_load, kiln_rt_run or kiln_rt_set_num_threads on the same
 * thread (each clears or replaces it), and calls on other threads never change it. Copy the
 * text to keep it longer. */
KILN_RT_API const char* kiln_rt_last_error(void);

/* The signature. Names and signatures ("float32[s0, 1, 28, 28]": a dim is a size or a
 * symbol, one size per call for every use of a symbol) stay valid while the model is
 * loaded; NULL when `index` is out of range. */
KILN_RT_API size_t kiln_rt_input_count(const kiln_rt_model* model);
KILN_RT_API size_t kiln_rt_output_count(const kiln_rt_model* model);
KILN_RT_API const char* kiln_rt_input_name(const kiln_rt_model* model, size_t index);
KILN_RT_API const char* kiln_rt_input_signature(const kiln_rt_model* model, size_t index);
KILN_RT_API const char* kiln_rt_output_name(const kiln_rt_model* model, size_t index);
KILN_RT_API const char* kiln_rt_output_signature(const kiln_rt_model* model, size_t index);
/* Where the model runs: "cpu", or "cuda" for an artifact exported with `--device cuda` (it
 * runs on GPU 0); NULL for a NULL model. */
KILN_RT_API const char* kiln_rt_device(const kiln_rt_model* model);
/* The manifest as loaded (JSON). */
KILN_RT_API const char* kiln_rt_manifest(const kiln_rt_model* model);

/* The threads kiln_rt's kernels use per run, the caller's included: KILN_NUM_THREADS or the
 * number of cores unless set. Set it while no run is in progress (a server running one
 * model per core wants 1). Returns 0, or -1 when n < 1. */
KILN_RT_API int kiln_rt_set_num_threads(int n);
KILN_RT_API int kiln_rt_num_threads(void);

/* The version of this kiln_rt ("0.1.0"). */
KILN_RT_API const char* kiln_rt_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_RT_H */
