// ASSERT_OK / EXPECT_OK / ASSERT_OK_AND_ASSIGN for gpupool::Status and Result<T> in GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "base/status.h"

// Status helpers for tests.
#define GPUPOOL_TEST_CONCAT_(a, b) a##b
#define GPUPOOL_TEST_CONCAT(a, b) GPUPOOL_TEST_CONCAT_(a, b)
#ifndef ASSERT_OK
#define ASSERT_OK(expr)                                     \
  do {                                                      \
    ::gpupool::Status _s = (expr);                          \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                     \
  do {                                                      \
    ::gpupool::Status _s = (expr);                          \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(GPUPOOL_TEST_CONCAT(_r_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)                   \
  auto tmp = (expr);                                                 \
  ASSERT_TRUE(tmp.ok()) << #expr << ": " << tmp.status().ToString(); \
  lhs = std::move(tmp).value()
#endif  // ASSERT_OK
