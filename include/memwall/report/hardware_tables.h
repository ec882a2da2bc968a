// Hardware profiles as people read them: `memwall gpus`' table, a measured
// profile beside a built-in one (`memwall calibrate`), and a traced graph's
// measured kernels (`calibrate --graph`), as rows and JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/hw/calibration.h"
#include "memwall/hw/hardware.h"

namespace memwall {

// One row per profile: memory, bf16 and fp32 peaks, HBM and host->device
// bandwidth, description; with a header.
std::string gpus_table(const std::vector<Hardware>& gpus);

// The measured profile beside a built-in one, field by field, after a blank
// line. A built-in's rates are peaks times its efficiencies: what its cost
// model predicts a kernel reaches, the same kind of figure as the
// measurement.
std::string profiles_side_by_side(const Hardware& measured, const Hardware& builtin);

// A graph's measured kernels (`file` names the graph): three rows of the
// calibration table (kernels, copy contention, op overhead), and its JSON.
std::string kernel_measure_rows(const std::string& file, const KernelMeasure& m);
nlohmann::json kernel_measure_json(const std::string& file, const KernelMeasure& m);

}  // namespace memwall
