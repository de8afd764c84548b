/* CHECK(call): a libhsakmt call must succeed; else name it and return 1 from the caller. */
#ifndef HSAKMT_CHECK_H
#define HSAKMT_CHECK_H

#include <hsakmt.h>
#include <stdio.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        HSAKMT_STATUS status_ = (call);                                              \
        if (status_ != HSAKMT_STATUS_SUCCESS) {                                      \
            fprintf(stderr, "FAILED %s = %d (line %d)\n", #call, (int)status_, __LINE__); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

#endif
