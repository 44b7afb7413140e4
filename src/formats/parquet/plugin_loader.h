// formats/parquet/plugin_loader.h — finds and loads the Parquet plugin
// (formats/parquet/engine.h) on first use, for the pyarrow the user has.
//
// Plugins: libstoker_parquet_arrow<major>.so, one per supported pyarrow major,
// beside the code that runs (the Python module's directory, or the
// executable's and its parent: the wheel's stoker/bin/stoker), or in
// $STOKER_PARQUET_PLUGIN_DIR.
// Which: $STOKER_PYARROW_DIR names pyarrow's library directory (the Python
// package sets it after `import pyarrow` when a Parquet source is first given;
// the `stoker` command's Python entry sets it for the native command). Its
// libarrow.so.<major>00 picks the plugin; that very libarrow and libparquet
// are loaded first (in Python, the ones `import pyarrow` loaded: the same
// files), so the plugin binds to them by SONAME. Unset, each plugin is tried,
// newest first, with its RPATH ($ORIGIN/../pyarrow: a pyarrow installed beside stoker).
// Everything is loaded RTLD_LOCAL: Arrow's symbols, and the OpenSSL that
// pyarrow's libparquet carries, never enter the global scope where libcurl's
// libcrypto would bind to them.
// No plugin for that pyarrow, or none loads: FailedPrecondition naming the
// pyarrow versions that work and the pip command that gets one.
// Thread-safety: all calls from any thread.
#pragma once

#include <vector>

#include "formats/parquet/engine.h"

namespace stoker {

// The engine of the loaded plugin, loading it on the first call; a failure
// is not kept (a later call tries again, e.g. once pyarrow is installed).
Result<const ParquetEngine*> LoadParquetEngine();

// The pyarrow majors this build has plugins for, ascending.
std::vector<int> ParquetPluginMajors();

}  // namespace stoker
