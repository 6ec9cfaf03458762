/* The local rules of a collective instruction (what one program can check
 * alone; the rules across programs are checked when the call runs,
 * collective.c): the DMA engine, at most a destination ap0 and a source ap1,
 * a known action, and a reduction's ALU op and dtypes.
 */
#include "nc/nc_internal.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

nrt_status nc_check_collective(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0];
  if (inst->engine != NRT_NC_ENGINE_DMA)
    return nc_fail(diag, i, -1, "engine", INVALID, "a collective runs on the DMA engines");
  for (int k = 2; k < NRT_NC_MAX_APS; k++)
    if (inst->ap[k].tensor >= 0)
      return nc_fail(diag, i, inst->ap[k].tensor, "operand", INVALID,
                     "a collective instruction has a destination and a source only");
  int32_t action = inst->func[0];
  if (action < NRT_NC_COLLECTIVE_NONE || action > NRT_NC_COLLECTIVE_ALLTOALL_V)
    return nc_fail(diag, i, -1, "collective_action", INVALID, "unknown collective action %d", action);
  if (action == NRT_NC_COLLECTIVE_NONE && dst->tensor >= 0)
    return nc_fail(diag, i, dst->tensor, "operand", INVALID,
                   "a collective instruction without an action writes nothing");
  if (action != NRT_NC_COLLECTIVE_NONE && dst->tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "a receiving collective needs a destination");
  if ((action == NRT_NC_COLLECTIVE_GATHER_V || action == NRT_NC_COLLECTIVE_ALLTOALL_V) &&
      inst->imm[0] < 1)
    return nc_fail(diag, i, -1, "replica_group", INVALID, "a _v collective needs its group's size");
  if (action == NRT_NC_COLLECTIVE_PAIR_REDUCE) {
    int32_t op = inst->func[1];
    if (op != NRT_NC_ALU_ADD && op != NRT_NC_ALU_MAXIMUM && op != NRT_NC_ALU_MINIMUM)
      return nc_fail(diag, i, -1, "collective_op", INVALID,
                     "a collective reduces with nl.add, nl.minimum or nl.maximum only");
  }
  if (action == NRT_NC_COLLECTIVE_REDUCE) {
    int32_t op = inst->func[1];
    if (op != NRT_NC_ALU_ADD && op != NRT_NC_ALU_MAXIMUM && op != NRT_NC_ALU_MINIMUM)
      return nc_fail(diag, i, -1, "collective_op", INVALID,
                     "a collective reduces with nl.add, nl.minimum or nl.maximum only");
    if (inst->imm[0] < 1 || inst->imm[0] >= 9007199254740992.0)
      return nc_fail(diag, i, -1, "replica_group", INVALID, "a reduction needs a group of programs");
  }
  if (inst->imm[3] < 0)
    return nc_fail(diag, i, -1, "collective_call", INVALID, "a collective call number is negative");
  return NRT_SUCCESS;
}
