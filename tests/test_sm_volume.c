#include "test.h"
#include "../pbd_sm.h"
void suite_sm_volume(void) {}
