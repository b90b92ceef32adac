//===- TileModule.cpp - contexts, parsing, printing, diagnostics ----------===//
#include "tilejit/ir/TileModuleImpl.h"

#include "tilejit/Error.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tilejit {

std::shared_ptr<MLIRContext> makeTilejitContext() {
  DialectRegistry registry;
  registerTilejitDialects(registry);
  auto ctx =
      std::make_shared<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

void collectDiagnostics(MLIRContext &ctx, const std::string &what,
                        const std::function<LogicalResult()> &fn) {
  std::string messages;
  llvm::raw_string_ostream os(messages);
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    os << "\n  " << diag.getLocation() << ": " << diag;
    for (auto &note : diag.getNotes())
      os << "\n    note: " << note;
    return success();
  });
  if (failed(fn()))
    throw Error(what + messages);
}

TileModule::TileModule(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

TileModule TileModule::parse(const std::string &text,
                             const std::string &kernelName) {
  auto impl = std::make_shared<Impl>();
  impl->context = makeTilejitContext();
  impl->kernelName = kernelName;
  collectDiagnostics(*impl->context, "cannot parse tile IR", [&] {
    impl->module = parseSourceString<ModuleOp>(text, impl->context.get());
    return success(bool(impl->module));
  });
  return TileModule(impl);
}

const std::string &TileModule::kernelName() const { return impl_->kernelName; }

static DType dtypeOf(Type t, const std::string &kernel) {
  if (std::optional<DType> d = dtypeOfScalar(t))
    return *d;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << t;
  throw Error("kernel '" + kernel + "': no parameter can have type " + text);
}

std::vector<KernelParam> TileModule::params() const {
  func::FuncOp kernel;
  impl_->module->walk([&](func::FuncOp f) {
    if (f->hasAttr(attr::kKernel) || !kernel)
      kernel = f;
  });
  std::vector<KernelParam> out;
  if (!kernel)
    return out;
  for (auto [i, t] : llvm::enumerate(kernel.getArgumentTypes())) {
    KernelParam p;
    auto name = kernel.getArgAttrOfType<StringAttr>(i, attr::kArgName);
    p.name = name ? name.str() : "arg" + std::to_string(i);
    auto ptr = dyn_cast<tile::PtrType>(t);
    p.pointer = bool(ptr);
    p.dtype = dtypeOf(ptr ? ptr.getElementType() : t, kernelName());
    out.push_back(std::move(p));
  }
  return out;
}

std::string TileModule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  impl_->module->print(os);
  return text;
}

Operation *TileModule::operation() const {
  return impl_->module->getOperation();
}

TileModule TileModule::clone() const {
  auto copy = std::make_shared<Impl>();
  copy->context = impl_->context;
  copy->kernelName = impl_->kernelName;
  copy->module = impl_->module->clone();
  return TileModule(copy);
}

} // namespace tilejit
