// The public API of halfgrad in one include.
#pragma once
#include "framework/autograd.h"
#include "framework/device.h"
#include "framework/dtype.h"
#include "framework/error.h"
#include "framework/generator.h"
#include "framework/gradcheck.h"
#include "framework/tensor.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/reduce.h"
