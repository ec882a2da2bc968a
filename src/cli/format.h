// Kept for the files of `memwall trace` and `inspect`,
// which other work of issue 46 moves: the numbers and table rows the verbs
// print now live in memwall/base/human.h and memwall/report/format.h.
// Remove once nothing here includes "format.h".
#pragma once

#include "memwall/report/format.h"
