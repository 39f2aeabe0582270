/*
 * INCRBYFLOAT arithmetic in C's long double, as Redis does it.
 *
 * Redis parses both operands with strtold, adds them as long double (the
 * x87 80-bit extended format on x86-64) and prints the sum with "%.17Lf",
 * trailing zeros removed. An f64 gives other answers for everyday inputs
 * (0.1 + 0.2 is "0.3" in Redis, 0.30000000000000004 in f64) and cannot hold
 * sums beyond 1.8e308 that Redis accepts. Rust has no long double, so this
 * file does the parse, the sum and the print; src/long_double.rs wraps it.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest operand text accepted, as Redis' MAX_LONG_DOUBLE_CHARS. */
#define TEXT_MAX 5120

/* Parses exactly `len` bytes as a long double; 0 when they are not one:
 * empty or too long, leading space, trailing bytes (an embedded NUL
 * included: strtold would stop there), NaN, or a value that overflows
 * or underflows to zero. */
static int parse(const char *text, size_t len, long double *out)
{
    char buf[TEXT_MAX];
    char *end;
    long double value;

    if (len == 0 || len >= sizeof buf)
        return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (isspace((unsigned char)buf[0]))
        return 0;
    errno = 0;
    value = strtold(buf, &end);
    if (end != buf + len || errno == EINVAL || isnan(value))
        return 0;
    if (errno == ERANGE && (isinf(value) || value == 0.0L))
        return 0;
    *out = value;
    return 1;
}

/*
 * current + increment, printed into out (at least TEXT_MAX bytes).
 * Returns the printed length, or
 *   -1 when current is not a float (has_current 0 means 0),
 *   -2 when increment is not one,
 *   -3 when the sum is NaN or infinite,
 *   -4 when the sum does not fit the buffer,
 *   -5 when the increment itself is infinite.
 */
long strata_long_double_add(const char *current, size_t current_len, int has_current,
                            const char *increment, size_t increment_len,
                            char *out, size_t out_cap)
{
    long double a = 0.0L, b, sum;
    int len;

    if (has_current && !parse(current, current_len, &a))
        return -1;
    if (!parse(increment, increment_len, &b))
        return -2;
    if (isinf(b))
        return -5;
    sum = a + b;
    if (isnan(sum) || isinf(sum))
        return -3;
    len = snprintf(out, out_cap, "%.17Lf", sum);
    if (len < 0 || (size_t)len + 1 > out_cap)
        return -4;
    if (strchr(out, '.') != NULL) {
        while (out[len - 1] == '0')
            len--;
        if (out[len - 1] == '.')
            len--;
        out[len] = '\0';
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    return len;
}

/* `value` as Redis' addReplyHumanLongDouble prints it (GEOPOS): widened to
 * long double, "%.17Lf", trailing zeros and point removed. */
long strata_human_double(double value, char *out, size_t out_cap)
{
    long double wide = value;
    int len = snprintf(out, out_cap, "%.17Lf", wide);
    if (len < 0 || (size_t)len + 1 > out_cap)
        return -1;
    if (strchr(out, '.') != NULL) {
        while (out[len - 1] == '0')
            len--;
        if (out[len - 1] == '.')
            len--;
        out[len] = '\0';
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    return len;
}
