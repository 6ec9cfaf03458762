/* The fault-injection hook for allocations that are not libc calls (device
 * memory): rt_fault_fails() counts one allocation and returns nonzero if it
 * is the one to fail. The hook is defined only when the build has
 * -DNRT_FAULT_INJECTION=ON (runtime/fault/fault_injection.c); elsewhere the
 * weak reference is null and the check is one predictable branch, so the
 * runtime's objects are the same in both builds. */
#ifndef NEURONRT_FAULT_H
#define NEURONRT_FAULT_H

int rt_fault_should_fail(void) __attribute__((weak));

static inline int rt_fault_fails(void) { return rt_fault_should_fail && rt_fault_should_fail(); }

#endif
