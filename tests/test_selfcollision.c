/* tests/test_selfcollision.c - cloth self-collision and cloth-cloth collision. */
#include "test.h"
void suite_selfcollision(void) {}
