/* The implementation of pbd_upsample.h for the fuzz harnesses (see impl_pbd.c). */
#define PBD_UPSAMPLE_IMPLEMENTATION
#include "pbd_upsample.h"
