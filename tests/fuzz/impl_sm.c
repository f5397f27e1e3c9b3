/* The implementation of pbd_sm.h for the fuzz harnesses (see impl_pbd.c). */
#include "pbd.h"
#define PBD_SM_IMPLEMENTATION
#include "pbd_sm.h"
