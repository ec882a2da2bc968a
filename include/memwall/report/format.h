// Table rows shared by the verbs' human output: one labelled row, and what
// the ranks of a data-parallel plan share. The numbers in them are written
// by memwall/base/human.h, included here for every table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memwall/base/human.h"
#include "memwall/hw/hardware.h"

namespace memwall {

// The `ranks` row of a plan or simulation of several data-parallel ranks:
// how many nodes they fill and which figures are per rank.
std::string ranks_row(const Hardware& hw, int ranks);
// One row of a verb's table: "  label<padded to `width`>value\n".
std::string field(std::string_view label, std::string_view value, int width = 24);

}  // namespace memwall
