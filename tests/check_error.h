/* tests/check_error.h - checks that a failing call reports its error
   (pbd.h CONVENTIONS): the result, and a fresh message in pbd_last_error()
   that starts with the result's name ("PBD_ERROR_NAME: ...") and, when
   `needle` is given, names what was wrong (a parameter, a field), in words
   (pbdt_message_reads_as_words, tests/test.h). A call on a world must also
   leave that message in the world (CHECK_WORLD_ERROR).
   Used by the tests of pbd_sm.h and pbd_upsample.h. */
#ifndef PBD_TEST_CHECK_ERROR_H
#define PBD_TEST_CHECK_ERROR_H
#include "test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PBDT_NO_MESSAGE "pbdt: the call left no message"

static inline void pbdt_check_error(const pbd_world *w, pbd_result got, pbd_result want, const char *needle,
                                    const char *expr, const char *file, int line) {
    if (got != want) {
        pbdt_fail(file, line, "%s returned %s, wanted %s", expr, pbd_result_string(got), pbd_result_string(want));
        return;
    }
    const char *m = pbd_last_error(), *name = pbd_result_string(want), *colon = strchr(name, ':');
    size_t n = colon ? (size_t)(colon - name) : strlen(name);
    if (strstr(m, PBDT_NO_MESSAGE)) pbdt_fail(file, line, "%s: no message", expr);
    else if (strncmp(m, name, n) != 0 || m[n] != ':' || !m[n + 1])
        pbdt_fail(file, line, "%s: the message \"%s\" does not start with %.*s", expr, m, (int)n, name);
    else if (needle && !strstr(m, needle))
        pbdt_fail(file, line, "%s: the message \"%s\" does not name \"%s\"", expr, m, needle);
    else if (!pbdt_message_reads_as_words(m))
        pbdt_fail(file, line, "%s: the message \"%s\" reads as code (\"%s\")", expr, m, pbdt_message_code_fragment(m));
    if (getenv("PBDT_PRINT_ERRORS")) printf("PBDT_MSG %s:%d %s\n", file, line, m);
    if (w && strcmp(pbd_world_last_error(w), m) != 0)
        pbdt_fail(file, line, "%s: the world's message \"%s\" is not the call's \"%s\"", expr, pbd_world_last_error(w),
                  m);
}
/* expr fails with want and a message that contains needle (NULL: any) */
#define CHECK_ERROR(expr, want, needle) CHECK_WORLD_ERROR(NULL, expr, want, needle)
#define CHECK_WORLD_ERROR(w, expr, want, needle)                                     \
    do {                                                                             \
        pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "%s", PBDT_NO_MESSAGE);     \
        pbd_result pbdt_e_ = (expr);                                                 \
        pbdt_check_error((w), pbdt_e_, (want), (needle), #expr, __FILE__, __LINE__); \
    } while (0)
/* The same, and the message read back is in words (said out loud for the
   tests of the messages themselves; pbdt_check_error checks it too) */
#define CHECK_ERROR_IN_WORDS(w, expr, want, needle)                                                             \
    do {                                                                                                        \
        CHECK_WORLD_ERROR(w, expr, want, needle);                                                               \
        CHECK_MSG(pbdt_message_reads_as_words(pbd_last_error()), "%s: the message \"%s\" reads as code", #expr, \
                  pbd_last_error());                                                                            \
    } while (0)
#endif
