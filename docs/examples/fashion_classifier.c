/* A plain C program that classifies the Fashion-MNIST test set with a model exported by
 * `kiln export` (or kiln::export_model), through libkiln_rt alone: no C++ in sight, no
 * compiler at run time. It prints the test accuracy (the same figure `kiln eval` prints for
 * the checkpoint) and the latency per call at batch 1 and 256.
 *
 *   cc fashion_classifier.c -I runtime/rt/include -L build/runtime/rt -lkiln_rt -lz
 *   ./a.out fashion.kiln /usr/share/datasets/fashion-mnist [max_test]
 *
 * The model reads [batch, 1, 28, 28] float32 pixels scaled to [0, 1] and normalized with
 * the training set's mean and standard deviation, as kiln's training does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "kiln_rt.h"

#define PIXELS (28 * 28)

/* The normalization of kiln::models::load_classification_data. */
static const float kMean = 0.2860f;
static const float kStd = 0.3530f;

/* Reads a gzip'ed IDX file: checks the magic number, returns the payload (malloc'ed) and
 * the number of items. */
static uint8_t* read_idx(const char* path, uint32_t magic, size_t item_bytes, size_t* count) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  uint8_t header[16];
  size_t header_bytes = magic == 0x803 ? 16 : 8;
  uint8_t* data = NULL;
  if (gzread(f, header, (unsigned)header_bytes) == (int)header_bytes) {
    uint32_t m = (uint32_t)header[0] << 24 | header[1] << 16 | header[2] << 8 | header[3];
    uint32_t n = (uint32_t)header[4] << 24 | header[5] << 16 | header[6] << 8 | header[7];
    if (m == magic) {
      data = malloc((size_t)n * item_bytes);
      if (data && gzread(f, data, (unsigned)(n * item_bytes)) == (int)(n * item_bytes)) {
        *count = n;
      } else {
        free(data);
        data = NULL;
      }
    }
  }
  gzclose(f);
  if (!data) fprintf(stderr, "%s is not a complete IDX file (magic 0x%x)\n", path, magic);
  return data;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Runs the model on `batch` images starting at `images`; NULL on failure (the reason is
 * printed). */
static kiln_rt_outputs* classify(kiln_rt_model* model, const float* images, int64_t batch) {
  int64_t shape[4] = {batch, 1, 28, 28};
  kiln_rt_tensor x = {(void*)images, KILN_RT_FLOAT32, 4, shape};
  kiln_rt_outputs* out = kiln_rt_run(model, &x, 1);
  if (!out) fprintf(stderr, "kiln_rt_run: %s\n", kiln_rt_last_error());
  return out;
}

/* Median microseconds per call at this batch size, over 5 rounds of `calls` calls. */
static double median_latency_us(kiln_rt_model* model, const float* images, int64_t batch,
                                int calls) {
  double rounds[5];
  for (int r = 0; r < 5; ++r) {
    double start = now_us();
    for (int i = 0; i < calls; ++i) kiln_rt_outputs_free(classify(model, images, batch));
    rounds[r] = (now_us() - start) / calls;
  }
  qsort(rounds, 5, sizeof rounds[0], compare_doubles);
  return rounds[2];
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ARTIFACT_DIR FASHION_MNIST_DIR [MAX_TEST]\n", argv[0]);
    return 2;
  }
  double load_start = now_us();
  kiln_rt_model* model = kiln_rt_load(argv[1]);
  if (!model) {
    fprintf(stderr, "kiln_rt_load: %s\n", kiln_rt_last_error());
    return 1;
  }
  printf("kiln_rt %s loaded %s in %.1f ms: x: %s -> %s: %s\n", kiln_rt_version(), argv[1],
         (now_us() - load_start) / 1e3, kiln_rt_input_signature(model, 0),
         kiln_rt_output_name(model, 0), kiln_rt_output_signature(model, 0));

  char path[4096];
  size_t n_images = 0, n_labels = 0;
  snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", argv[2]);
  uint8_t* raw = read_idx(path, 0x803, PIXELS, &n_images);
  snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", argv[2]);
  uint8_t* labels = read_idx(path, 0x801, 1, &n_labels);
  if (!raw || !labels || n_images != n_labels) return 1;
  size_t n = n_images;
  if (argc > 3 && strtoul(argv[3], NULL, 10) > 0 && strtoul(argv[3], NULL, 10) < n)
    n = strtoul(argv[3], NULL, 10);

  float* images = malloc(n * PIXELS * sizeof(float));
  for (size_t i = 0; i < n * PIXELS; ++i) images[i] = ((float)raw[i] / 255.0f - kMean) / kStd;

  /* Batches of 1000, as kiln's evaluate() does. */
  size_t correct = 0;
  for (size_t start = 0; start < n; start += 1000) {
    int64_t batch = (int64_t)(n - start < 1000 ? n - start : 1000);
    kiln_rt_outputs* out = classify(model, images + start * PIXELS, batch);
    if (!out) return 1;
    const kiln_rt_tensor* logits = kiln_rt_outputs_get(out, 0);
    int64_t classes = logits->shape[1];
    const float* row = logits->data;
    for (int64_t i = 0; i < batch; ++i, row += classes) {
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;
      correct += best == labels[start + (size_t)i];
    }
    kiln_rt_outputs_free(out);
  }
  printf("kiln_rt (C) test accuracy: %.4f\n", (double)correct / (double)n);

  printf("kiln_rt (C) latency (median):\n");
  for (int k = 0; k < 2; ++k) {
    int64_t batch = k == 0 ? 1 : 256;
    if ((size_t)batch > n) break;
    kiln_rt_outputs_free(classify(model, images, batch)); /* warm: buffers planned */
    double us = median_latency_us(model, images, batch, batch == 1 ? 2000 : 50);
    printf("  batch %4lld: kiln_rt %8.1f us\n", (long long)batch, us);
  }
  free(images);
  free(raw);
  free(labels);
  kiln_rt_free(model);
  return 0;
}
