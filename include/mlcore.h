/* mlcore.h - the public interface of libmlcore.
 *
 * libmlcore reads, validates, converts, writes and runs the mlcore model
 * formats: .mlb models (see mlb(5)), .mlt tokenizers (mlt(5)) and .mli
 * importance matrices (mli(5)), and reads GGUF.  This umbrella includes
 * every part; a part's header (mlcore/base.h, mlcore/mlb.h, ...) may be
 * included alone.  Conventions shared by every function:
 *
 *   - Every function that can fail returns an ml_status and, when the caller
 *     passes a non-NULL ml_error, fills it with a message that names the
 *     field or tensor and the byte offset.  There is no global error state.
 *   - The library never prints and never exits.
 *   - Handles are created by *_open / *_new and released by *_close / *_free,
 *     which accept NULL.  Pointers returned by accessors are borrowed: they
 *     stay valid until the handle is closed.
 *   - All sizes read from files are distrusted; size arithmetic is checked for
 *     overflow, also where size_t has 32 bits.
 */
#ifndef MLCORE_H
#define MLCORE_H

/* One header per part, each including what it needs. */
#include <mlcore/base.h>
#include <mlcore/buf.h>
#include <mlcore/mlb.h>
#include <mlcore/quant.h>
#include <mlcore/gguf.h>
#include <mlcore/mlt.h>
#include <mlcore/grammar.h>
#include <mlcore/jinja.h>
#include <mlcore/chat.h>
#include <mlcore/convert_tok.h>
#include <mlcore/mli.h>
#include <mlcore/convert.h>
#include <mlcore/requant.h>
#include <mlcore/kernels.h>
#include <mlcore/runtime.h>
#include <mlcore/stop.h>
#include <mlcore/generate.h>

#endif /* MLCORE_H */
