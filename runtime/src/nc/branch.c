/* Compiled loops: nl.fori_loop and nl.while_loop as compare-and-branch.
 *
 * The NKI reference compiles a runtime loop into branches that the engine
 * sequencers execute on 32-bit registers (nl.fori_loop: "the loop compiles
 * into a compare-and-branch that has no 64-bit form"). NRT_NC_BRANCH is that
 * branch: it jumps to imm0 when word ap0 compares true against word ap1 (or
 * imm1), always when ap0 is absent. The tracer lays a loop out as
 *
 *   head:  BRANCH to end if the loop is over     (conditional, forward)
 *          body
 *          BRANCH to head                        (unconditional, backward)
 *   end:
 *
 * so a backward branch closes a loop whose body is [target, branch].
 * Liveness: a tile used before a loop and touched in its body carries data
 * from one iteration to the next, so it lives to the loop's last
 * instruction; a tile first used inside the body is fresh each iteration.
 * A run stops with rule loop_limit after NC_LOOP_LIMIT backward jumps, so a
 * while_loop whose condition never clears fails instead of hanging.
 */
#include <string.h>
#include "nc/access.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

static int is_comparison(int32_t op) {
  return op >= NRT_NC_ALU_EQUAL && op <= NRT_NC_ALU_LESS_EQUAL;
}

nrt_status nc_check_branch(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  double target = inst->imm[0];
  if (!(target >= 0 && target <= p->num_insts) || target != (double)(int32_t)target)
    return nc_fail(diag, i, -1, "loop", INVALID,
                   "a loop branch targets instruction %g; the program has %d", target,
                   p->num_insts);
  if (inst->ap[0].tensor < 0) {
    if ((int32_t)target > i)
      return nc_fail(diag, i, -1, "loop", INVALID, "an unconditional branch closes a loop: it "
                     "jumps back to the loop's head");
    return NRT_SUCCESS;
  }
  if (!is_comparison(inst->func[0]))
    return nc_fail(diag, i, -1, "loop", INVALID, "a loop branch compares (ALU op %d is not a "
                   "comparison)", inst->func[0]);
  for (int k = 0; k < 2; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor < 0) continue;
    if (p->tensors[ap->tensor].buffer != NRT_NC_SBUF)
      return nc_fail(diag, i, ap->tensor, "loop_operand", INVALID,
                     "a loop's bound or condition is an SBUF word");
    if (ap->dtype != NRT_NC_INT32 && ap->dtype != NRT_NC_UINT32)
      return nc_fail(diag, i, ap->tensor, "loop_operand", INVALID,
                     "a loop's bound or condition is a 32-bit integer (the compare-and-branch "
                     "has no other form)");
    if (ap->partitions != 1 || nc_ap_free_elems(ap) != 1)
      return nc_fail(diag, i, ap->tensor, "loop_operand", INVALID,
                     "a loop's bound or condition is one [1, 1] word, got [%d, %lld]",
                     ap->partitions, (long long)nc_ap_free_elems(ap));
  }
  return NRT_SUCCESS;
}

void nc_extend_loop_lifetimes(const nrt_nc_program_t p, int32_t *last_use) {
  /* Inner loops close first, so a tile carried into an outer loop through
   * an inner one is extended by both. */
  for (int32_t e = 0; e < p->num_insts; e++) {
    const nrt_nc_inst *inst = &p->insts[e];
    if (inst->opcode != NRT_NC_BRANCH || (int32_t)inst->imm[0] > e) continue;
    int32_t b = (int32_t)inst->imm[0];
    for (int32_t t = 0; t < p->num_tensors; t++)
      if (p->first_use[t] >= 0 && p->first_use[t] < b && last_use[t] >= b && last_use[t] < e)
        last_use[t] = e;
  }
}

int64_t nc_branch_trips(const nrt_nc_inst *inst) {
  return inst->imm[2] >= 0 ? (int64_t)inst->imm[2] : 1;
}

static int64_t word(const nc_core *core, const nrt_nc_ap *ap) {
  uint8_t raw[4];
  nc_gather_raw(core, ap, 0, raw);
  if (ap->dtype == NRT_NC_UINT32) {
    uint32_t v;
    memcpy(&v, raw, 4);
    return v;
  }
  int32_t v;
  memcpy(&v, raw, 4);
  return v;
}

int32_t nc_exec_branch(const nc_core *core, const nrt_nc_inst *inst, int64_t *jumps_back) {
  int32_t i = (int32_t)(inst - core->program->insts), target = (int32_t)inst->imm[0];
  int taken = 1;
  if (inst->ap[0].tensor >= 0) {
    int64_t a = word(core, &inst->ap[0]);
    int64_t b = inst->ap[1].tensor >= 0 ? word(core, &inst->ap[1]) : (int64_t)inst->imm[1];
    switch (inst->func[0]) {
      case NRT_NC_ALU_EQUAL: taken = a == b; break;
      case NRT_NC_ALU_NOT_EQUAL: taken = a != b; break;
      case NRT_NC_ALU_GREATER: taken = a > b; break;
      case NRT_NC_ALU_GREATER_EQUAL: taken = a >= b; break;
      case NRT_NC_ALU_LESS: taken = a < b; break;
      default: taken = a <= b; break; /* LESS_EQUAL, the last comparison */
    }
  }
  if (!taken) return i + 1;
  if (target <= i && ++*jumps_back > NC_LOOP_LIMIT) {
    *core->fault = rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "NKI instruction %d: [loop_limit] the kernel's loops ran more than "
                           "%lld iterations; a while_loop whose condition never becomes 0 "
                           "does not end", i, (long long)NC_LOOP_LIMIT);
    return -1;
  }
  return target;
}
