// Compiling call records against ATen schemas (call.h).
#include "call.h"

#include <cmath>
#include <limits>

#include <ATen/core/jit_type.h>
#include <c10/core/TensorImpl.h>

#include "exec_error.h"

namespace memwall::exec {
namespace {

c10::ScalarType dtype_named(const std::string& name) {
  using c10::ScalarType;
  for (const ScalarType st :
       {ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16,
        ScalarType::Long, ScalarType::Int, ScalarType::Short, ScalarType::Char, ScalarType::Byte,
        ScalarType::Bool}) {
    if (name == c10::toString(st)) return st;
  }
  bad_input("unknown dtype \"{}\"", name);
}

c10::MemoryFormat memory_format_named(const std::string& name) {
  if (name == "Contiguous") return c10::MemoryFormat::Contiguous;
  if (name == "Preserve") return c10::MemoryFormat::Preserve;
  if (name == "ChannelsLast") return c10::MemoryFormat::ChannelsLast;
  if (name == "ChannelsLast3d") return c10::MemoryFormat::ChannelsLast3d;
  bad_input("unknown memory format \"{}\"", name);
}

double float_value(const nlohmann::json& v) {
  const nlohmann::json& f = v.at("f");
  if (f.is_number()) return f.get<double>();
  const std::string text = f.get<std::string>();
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  bad_input("unknown float \"{}\"", text);
}

bool is_float(const nlohmann::json& v) { return v.is_object() && v.contains("f"); }
bool is_tensor(const nlohmann::json& v) {
  return v.is_object() && (v.contains("t") || v.contains("l"));
}

int32_t buffer_of(const nlohmann::json& v) { return v.is_null() ? -1 : v.at("t").get<int32_t>(); }

void collect_leaves(const nlohmann::json& tree, ScalarExpr& expr) {
  if (!tree.is_array() || tree.empty()) return;
  if (tree[0] == "item") {
    expr.items.push_back(tensor_ref(tree.at(1)));
    return;
  }
  if (tree[0] == "setting") {
    if (tree.size() != 3 || !tree[1].is_string() || !tree[2].is_number()) {
      bad_input("malformed setting {}", tree.dump());
    }
    expr.settings.push_back(tree[1].get<std::string>());
    return;
  }
  for (size_t i = 1; i < tree.size(); ++i) collect_leaves(tree[i], expr);
}

c10::Scalar scalar_of(const nlohmann::json& v) {
  if (v.is_boolean()) return c10::Scalar(v.get<bool>());
  if (v.is_number_integer()) return c10::Scalar(v.get<int64_t>());
  if (is_float(v)) return c10::Scalar(float_value(v));
  bad_input("expected a number, got {}", v.dump());
}

// An enum-like argument ({"dtype"}, {"layout"}, {"memory_format"},
// {"device"}) as the IValue the schema's int/enum type takes.
std::optional<c10::IValue> enum_value(const nlohmann::json& v, c10::Device device) {
  if (!v.is_object()) return std::nullopt;
  if (v.contains("dtype")) return c10::IValue(dtype_named(v["dtype"].get<std::string>()));
  if (v.contains("layout")) {
    if (v["layout"] != "Strided") bad_input("unknown layout {}", v["layout"].dump());
    return c10::IValue(c10::Layout::Strided);
  }
  if (v.contains("memory_format")) {
    return c10::IValue(memory_format_named(v["memory_format"].get<std::string>()));
  }
  // The run's device: the emulated device is the CPU (Note [Emulated
  // device]), a GPU its CUDA device (Note [The CUDA run]).
  if (v.contains("device")) return c10::IValue(device);
  return std::nullopt;
}

void compile_value(const nlohmann::json& v, const c10::TypePtr& declared, CompiledArg& out,
                   c10::Allocator* host, c10::Device device) {
  c10::TypePtr type = declared;
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->expectRef<c10::OptionalType>().getElementType();
  }
  if (v.is_null()) {
    out.constant = c10::IValue();
    return;
  }
  using K = c10::TypeKind;
  switch (type->kind()) {
    case K::TensorType:
      if (is_tensor(v)) {
        out.kind = CompiledArg::Kind::kTensor;
        out.tensors.emplace_back(tensor_ref(v));
      } else if (is_float(v) && v.contains("expr")) {
        out.kind = CompiledArg::Kind::kExpr;
        out.expr_as = CompiledArg::As::kWrappedTensor;
        out.expr.tree = v["expr"];
        collect_leaves(out.expr.tree, out.expr);
      } else {
        out.constant = wrapped_number(scalar_of(v), host);
      }
      return;
    case K::ListType: {
      const c10::TypePtr elem = type->expectRef<c10::ListType>().getElementType();
      if (!v.is_array()) bad_input("expected a list, got {}", v.dump());
      if (elem->kind() == K::TensorType || elem->kind() == K::OptionalType) {
        out.kind = elem->kind() == K::TensorType ? CompiledArg::Kind::kTensorList
                                                 : CompiledArg::Kind::kOptionalTensorList;
        for (const nlohmann::json& x : v) {
          if (x.is_null()) {
            out.tensors.emplace_back(std::nullopt);
          } else {
            out.tensors.emplace_back(tensor_ref(x));
          }
        }
        return;
      }
      if (elem->kind() == K::IntType || elem->kind() == K::SymIntType) {
        c10::List<int64_t> list;
        for (const nlohmann::json& x : v) list.push_back(x.get<int64_t>());
        out.constant = c10::IValue(std::move(list));
      } else if (elem->kind() == K::FloatType) {
        c10::List<double> list;
        for (const nlohmann::json& x : v)
          list.push_back(is_float(x) ? float_value(x) : x.get<double>());
        out.constant = c10::IValue(std::move(list));
      } else if (elem->kind() == K::BoolType) {
        c10::List<bool> list;
        for (const nlohmann::json& x : v) list.push_back(x.get<bool>());
        out.constant = c10::IValue(std::move(list));
      } else {
        bad_input("a list of {} is not supported", elem->str());
      }
      return;
    }
    case K::FloatType:
    case K::NumberType:
      if (is_float(v) && v.contains("expr")) {
        out.kind = CompiledArg::Kind::kExpr;
        out.expr_as =
            type->kind() == K::FloatType ? CompiledArg::As::kDouble : CompiledArg::As::kScalar;
        out.expr.tree = v["expr"];
        collect_leaves(out.expr.tree, out.expr);
      } else if (type->kind() == K::FloatType) {
        out.constant = c10::IValue(is_float(v) ? float_value(v) : v.get<double>());
      } else {
        out.constant = c10::IValue(scalar_of(v));
      }
      return;
    case K::BoolType:
      out.constant = c10::IValue(v.get<bool>());
      return;
    case K::StringType:
      out.constant = c10::IValue(v.at("s").get<std::string>());
      return;
    default:
      break;
  }
  if (const std::optional<c10::IValue> e = enum_value(v, device)) {
    out.constant = *e;
    return;
  }
  if (type->kind() == K::IntType || type->kind() == K::SymIntType) {
    out.constant = c10::IValue(v.get<int64_t>());
    return;
  }
  bad_input("an argument of type {} ({}) is not supported", type->str(), v.dump());
}

}  // namespace

TensorRef tensor_ref(const nlohmann::json& v) {
  TensorRef ref;
  ref.local = v.contains("l");
  ref.buffer = ref.local ? v.at("l").get<int64_t>() : v.at("t").get<int64_t>();
  ref.sizes = v.at("size").get<std::vector<int64_t>>();
  ref.strides = v.at("stride").get<std::vector<int64_t>>();
  ref.offset = v.at("offset").get<int64_t>();
  ref.dtype = dtype_named(v.at("dtype").get<std::string>());
  if (ref.sizes.size() != ref.strides.size() || ref.offset < 0) {
    bad_input("a tensor view of buffer {} has {} sizes and {} strides, offset {}", ref.buffer,
              ref.sizes.size(), ref.strides.size(), ref.offset);
  }
  return ref;
}

at::Tensor wrapped_number(const c10::Scalar& value, c10::Allocator* host) {
  const c10::ScalarType st = value.isFloatingPoint() ? c10::ScalarType::Double
                             : value.isBoolean()     ? c10::ScalarType::Bool
                                                     : c10::ScalarType::Long;
  c10::Storage storage(c10::Storage::use_byte_size_t(), 8, host, /*resizable=*/false);
  void* data = storage.mutable_data();
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage),
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                   c10::scalarTypeToTypeMeta(st));
  impl->set_sizes_and_strides(c10::IntArrayRef(), c10::IntArrayRef(), 0);
  if (st == c10::ScalarType::Double) {
    *static_cast<double*>(data) = value.toDouble();
  } else if (st == c10::ScalarType::Bool) {
    *static_cast<bool*>(data) = value.toBool();
  } else {
    *static_cast<int64_t*>(data) = value.toLong();
  }
  impl->set_wrapped_number(true);
  return at::Tensor(std::move(impl));
}

CompiledCall compile_call(const nlohmann::json& call, const std::string& op_name,
                          c10::Allocator* host, c10::Device device) {
  CompiledCall compiled;
  try {
    const std::string name = call.at("op").get<std::string>();
    // A CPU step, or a fused step kept on the device: its ops over locals.
    if (name == "memwall::cpu_step" || name == "memwall::sequence") {
      const bool cpu = name == "memwall::cpu_step";
      compiled.kind = cpu ? CompiledCall::Kind::kCpuStep : CompiledCall::Kind::kSequence;
      compiled.name = name;
      for (const nlohmann::json& step : call.at("steps")) {
        // A CPU step's ops run on the host whatever the device.
        compiled.steps.push_back(
            compile_call(step, op_name, host, cpu ? c10::Device(c10::kCPU) : device));
      }
      compiled.locals = call.at("locals").get<size_t>();
      if (cpu) {
        compiled.param = buffer_of(call.at("param"));
        compiled.master = buffer_of(call.at("master"));
        compiled.update = buffer_of(call.at("update"));
      }
      return compiled;
    }
    if (name == "memwall::apply") {
      compiled.kind = CompiledCall::Kind::kApply;
      compiled.name = name;
      compiled.from = buffer_of(call.at("from"));
      compiled.to = buffer_of(call.at("to"));
      return compiled;
    }
    const std::string overload = call.value("overload", std::string());
    compiled.name = overload.empty() ? name : name + "." + overload;
    if (call.contains("unsupported")) {
      bad_input("its call takes {}", call["unsupported"].get<std::string>());
    }
    compiled.handle = c10::Dispatcher::singleton().findSchema({name, overload});
    if (!compiled.handle) {
      bad_input("{} is not an operator of this libtorch", compiled.name);
    }
    const c10::FunctionSchema& schema = compiled.handle->schema();
    const nlohmann::json& args = call.at("args");
    const nlohmann::json& kwargs = call.at("kwargs");
    const auto& declared = schema.arguments();
    if (args.size() > declared.size()) {
      bad_input("{} takes {} arguments, the call gives {}", compiled.name, declared.size(),
                args.size());
    }
    for (size_t i = 0; i < declared.size(); ++i) {
      const c10::Argument& a = declared[i];
      CompiledArg arg;
      if (i < args.size()) {
        compile_value(args[i], a.type(), arg, host, device);
      } else if (kwargs.contains(a.name())) {
        compile_value(kwargs[a.name()], a.type(), arg, host, device);
      } else if (a.default_value()) {
        arg.constant = *a.default_value();
      } else {
        bad_input("{}: argument {} is missing", compiled.name, a.name());
      }
      compiled.args.push_back(std::move(arg));
    }
    for (const nlohmann::json& r : call.at("results")) {
      if (r.is_object()) {
        compiled.results.push_back({r.at("l").get<int64_t>(), true});
      } else {
        compiled.results.push_back({r.is_null() ? -1 : r.get<int64_t>(), false});
      }
    }
    compiled.rng = call.value("rng", false);
  } catch (const BadInput& e) {
    bad_input("op {}: {}", op_name, e.what());
  } catch (const std::exception& e) {
    bad_input("op {}: malformed call record: {}", op_name, e.what());
  }
  return compiled;
}

void add_setting_names(const CompiledCall& call, std::set<std::string, std::less<>>& names) {
  for (const CompiledArg& a : call.args)
    names.insert(a.expr.settings.begin(), a.expr.settings.end());
  for (const CompiledCall& step : call.steps) add_setting_names(step, names);
}

double evaluate(const nlohmann::json& tree, const std::function<double(size_t)>& read,
                const Settings& settings, size_t& next_item) {
  if (tree.is_number()) return tree.get<double>();
  const std::string op = tree.at(0).get<std::string>();
  if (op == "item") return read(next_item++);
  if (op == "setting") {
    const auto set = settings.find(tree.at(1).get_ref<const std::string&>());
    return set != settings.end() ? set->second : tree.at(2).get<double>();
  }
  const double a = evaluate(tree.at(1), read, settings, next_item);
  if (op == "neg") return -a;
  const double b = evaluate(tree.at(2), read, settings, next_item);
  // The same double arithmetic Python did (pow is libm's pow there too).
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "pow") return std::pow(a, b);
  bad_input("unknown scalar expression \"{}\"", op);
}

}  // namespace memwall::exec
