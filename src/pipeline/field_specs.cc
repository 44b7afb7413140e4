// pipeline/field_specs.cc — the FieldSpec shorthands of stoker/loader.h.
#include "stoker/loader.h"

namespace stoker {

FieldSpec ImageField(std::string field, ImageSpec spec) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kImage;
  f.image = spec;
  return f;
}
FieldSpec NpyField(std::string field) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kNpy;
  return f;
}
FieldSpec NpzField(std::string field) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kNpz;
  return f;
}
FieldSpec ScalarField(std::string field, DType dtype) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kScalar;
  f.dtype = dtype;
  return f;
}
FieldSpec BytesField(std::string field, size_t max_bytes) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kBytes;
  f.max_bytes = max_bytes;
  return f;
}

FieldSpec TextField(std::string field, size_t max_bytes) {
  FieldSpec f = BytesField(std::move(field), max_bytes);
  f.kind = FieldKind::kText;
  return f;
}
FieldSpec JsonField(std::string field, size_t max_bytes) {
  FieldSpec f = BytesField(std::move(field), max_bytes);
  f.kind = FieldKind::kJson;
  return f;
}

}  // namespace stoker
