/* jpeg_floor: the CPU time libjpeg-turbo alone takes to decode JPEG files to RGB (TurboJPEG,
 * accurate DCT, fancy upsampling: what PIL and the loader's full decode do), on one thread,
 * with every file already in memory. It bounds what any pipeline that decodes the same
 * bytes can reach on N cores: N / (seconds per image), whoever wraps the decoder.
 *
 *   cc -O2 -pthread -o jpeg_floor tests/bench/jpeg_floor.c -lturbojpeg -ljpeg
 *   find DIR -name '*.jpg' | head -n 2000 | ./jpeg_floor [THREADS]
 *
 * Prints one JSON line: images, mean pixels, CPU seconds per image (median of 3 passes), and
 * with THREADS (e.g. 2, the cores a pipeline gets) the same-run floor on the machine as it is:
 * THREADS threads decoding the files between them (each its share) for 3 passes, images/s
 * of wall time (median pass), what those cores deliver under the load they have right now.
 * image_bench.sh runs it beside the pipeline it compares.
 * entropy_s_per_image: the CPU time of the entropy decoding alone (libjpeg's
 * jpeg_skip_scanlines over all rows but the last, which it reads), one pass: the part of a
 * decode that no crop, region or scaling saves; the rest is the inverse DCT, upsampling and
 * colour conversion.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#include <jpeglib.h> /* after stdio.h: it needs FILE and size_t */

typedef struct {
    unsigned char *data;
    unsigned long size;
} blob;

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int load(const char *path, blob *b)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "jpeg_floor: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->data = n > 0 ? malloc((size_t)n) : NULL;
    b->size = (unsigned long)n;
    const int ok = b->data != NULL && fread(b->data, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "jpeg_floor: cannot read %s\n", path);
        free(b->data);
        return -1;
    }
    return 0;
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct {
    const blob *files;
    size_t n; /* this thread's files */
    int failed;
    pthread_t thread;
} worker;

/* One pass over the thread's files: what one decode thread does. */
static void *decode_all(void *arg)
{
    worker *w = arg;
    tjhandle tj = tjInitDecompress();
    unsigned char *out = NULL;
    size_t out_cap = 0;
    for (size_t k = 0; k < w->n && tj != NULL; k++) {
        const blob *b = &w->files[k];
        int iw, ih, sub, cs;
        if (tjDecompressHeader3(tj, b->data, b->size, &iw, &ih, &sub, &cs) != 0) {
            w->failed = 1;
            break;
        }
        const size_t need = (size_t)iw * (size_t)ih * 3;
        if (need > out_cap) {
            free(out);
            out = malloc(need);
            out_cap = out != NULL ? need : 0;
        }
        if (out == NULL || tjDecompress2(tj, b->data, b->size, out, iw, 0, ih, TJPF_RGB, 0)) {
            w->failed = 1;
            break;
        }
    }
    free(out);
    if (tj != NULL) {
        tjDestroy(tj);
    }
    return NULL;
}

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} jerr;

static void on_error(j_common_ptr c) { longjmp(((jerr *)c->err)->jb, 1); }

/* Entropy-decodes the whole file (skipping every row but the last): 0, or -1 on failure. */
static int entropy_only(const blob *b, unsigned char *row)
{
    struct jpeg_decompress_struct ci;
    jerr e;
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, b->data, b->size);
    jpeg_read_header(&ci, TRUE);
    ci.out_color_space = JCS_RGB;
    jpeg_start_decompress(&ci);
    jpeg_skip_scanlines(&ci, ci.output_height - 1);
    JSAMPROW r = row;
    jpeg_read_scanlines(&ci, &r, 1);
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 0;
    if (argc > 2 || threads < 0 || threads > 64) {
        fprintf(stderr, "usage: jpeg_floor [THREADS] < list-of-files\n");
        return 2;
    }
    size_t n = 0, cap = 0;
    blob *files = NULL;
    char line[4096];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0') {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            files = realloc(files, cap * sizeof(*files));
            if (files == NULL) {
                return 1;
            }
        }
        if (load(line, &files[n]) == 0) {
            n++;
        }
    }
    if (n == 0) {
        fprintf(stderr, "jpeg_floor: no JPEG files on stdin\n");
        return 2;
    }
    tjhandle tj = tjInitDecompress();
    unsigned char *out = NULL;
    size_t out_cap = 0;
    double pixels = 0, pass[3];
    for (int p = 0; p < 3; p++) {
        const double t0 = cpu_seconds();
        for (size_t i = 0; i < n; i++) {
            int w, h, sub, cs;
            if (tjDecompressHeader3(tj, files[i].data, files[i].size, &w, &h, &sub, &cs) != 0) {
                fprintf(stderr, "jpeg_floor: file %zu: %s\n", i, tjGetErrorStr2(tj));
                return 1;
            }
            const size_t need = (size_t)w * (size_t)h * 3;
            if (need > out_cap) {
                free(out);
                out = malloc(need);
                out_cap = need;
                if (out == NULL) {
                    return 1;
                }
            }
            if (tjDecompress2(tj, files[i].data, files[i].size, out, w, 0, h, TJPF_RGB, 0) !=
                0) {
                fprintf(stderr, "jpeg_floor: file %zu: %s\n", i, tjGetErrorStr2(tj));
                return 1;
            }
            if (p == 0) {
                pixels += (double)w * (double)h;
            }
        }
        pass[p] = (cpu_seconds() - t0) / (double)n;
    }
    qsort(pass, 3, sizeof(pass[0]), cmp_double);
    const double e0 = cpu_seconds();
    for (size_t i = 0; i < n; i++) {
        if (entropy_only(&files[i], out) != 0) {
            fprintf(stderr, "jpeg_floor: file %zu: entropy decode failed\n", i);
            return 1;
        }
    }
    const double ent = (cpu_seconds() - e0) / (double)n;
    printf("{\"images\": %zu, \"mean_pixels\": %.0f, \"cpu_s_per_image\": %.6f, "
           "\"images_per_s_per_core\": %.1f, \"entropy_s_per_image\": %.6f",
           n, pixels / (double)n, pass[1], 1.0 / pass[1], ent);
    if (threads > 0) {
        worker ws[64];
        double wall[3];
        for (int p = 0; p < 3; p++) {
            const double t0 = wall_seconds();
            for (int t = 0; t < threads; t++) {
                const size_t a = n * (size_t)t / (size_t)threads;
                const size_t b = n * (size_t)(t + 1) / (size_t)threads;
                ws[t] = (worker){files + a, b - a, 0, 0};
                if (pthread_create(&ws[t].thread, NULL, decode_all, &ws[t]) != 0) {
                    return 1;
                }
            }
            for (int t = 0; t < threads; t++) {
                pthread_join(ws[t].thread, NULL);
                if (ws[t].failed) {
                    fprintf(stderr, "jpeg_floor: a decode thread failed\n");
                    return 1;
                }
            }
            wall[p] = wall_seconds() - t0;
        }
        qsort(wall, 3, sizeof(wall[0]), cmp_double);
        printf(", \"threads\": %d, \"images_per_s\": %.1f", threads, (double)n / wall[1]);
    }
    printf("}\n");
    tjDestroy(tj);
    free(out);
    for (size_t i = 0; i < n; i++) {
        free(files[i].data);
    }
    free(files);
    return 0;
}
