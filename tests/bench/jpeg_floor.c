/* jpeg_floor: the CPU time libjpeg-turbo alone takes to decode JPEG files to RGB (TurboJPEG,
 * accurate DCT, fancy upsampling: what PIL and the loader's full decode do), on one thread,
 * with every file already in memory. It bounds what any pipeline that decodes the same
 * bytes can reach on N cores: N / (seconds per image), whoever wraps the decoder.
 *
 *   cc -O2 -o jpeg_floor tests/bench/jpeg_floor.c -lturbojpeg
 *   find DIR -name '*.jpg' | head -n 2000 | ./jpeg_floor
 *
 * Prints one JSON line: images, mean pixels, CPU seconds per image (median of 3 passes).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

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

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
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
    printf("{\"images\": %zu, \"mean_pixels\": %.0f, \"cpu_s_per_image\": %.6f, "
           "\"images_per_s_per_core\": %.1f}\n",
           n, pixels / (double)n, pass[1], 1.0 / pass[1]);
    tjDestroy(tj);
    free(out);
    for (size_t i = 0; i < n; i++) {
        free(files[i].data);
    }
    free(files);
    return 0;
}
