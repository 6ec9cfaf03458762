/* An instruction operand that is either a per-partition tile or, absent,
 * the instruction's immediate. */
#ifndef NC_OPERAND_H
#define NC_OPERAND_H

#include "nc/access.h"
#include "nc/numerics.h"

/* Partition p's value of ap (its first element), or imm when ap is absent. */
static inline float nc_operand_or_imm(const nc_core *core, const nrt_nc_ap *ap, int64_t p, double imm) {
  if (ap->tensor < 0) return (float)imm;
  return nc_load(ap->dtype, nc_row(core, ap, p));
}

#endif
