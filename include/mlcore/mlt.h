/* mlcore/mlt.h - .mlt tokenizers (mlt(5)): reading, validating and writing
 * them, and encoding text to token ids and back.  Included by mlcore.h. */
#ifndef MLCORE_MLT_H
#define MLCORE_MLT_H

#include <mlcore.h>

#endif
