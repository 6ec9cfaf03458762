/* The neuron runtime: a simulated NeuronCore device for a C program. */
#ifndef NEURONRT_NRT_H
#define NEURONRT_NRT_H

#include "neuronrt/status.h"
#include "neuronrt/device.h"
#include "neuronrt/memory.h"
#include "neuronrt/op.h"
#include "neuronrt/stream.h"
#include "neuronrt/caching_allocator.h"
#include "neuronrt/nc.h"
#include "neuronrt/metrics.h"
#include "neuronrt/log.h"
#include "neuronrt/profile.h"
#include "neuronrt/roofline.h"

#endif
