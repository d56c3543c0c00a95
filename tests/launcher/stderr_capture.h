#pragma once
// Redirects fd 2 into a temporary file while it lives (the Job writes its
// lines there with write(2)); text() restores fd 2 and returns what was written.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()), saved_(::dup(2)) {
    REQUIRE(file_);
    REQUIRE(saved_ >= 0);
    std::fflush(stderr);
    ::dup2(::fileno(file_), 2);
  }
  ~StderrCapture() { text(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  std::string text() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
      std::rewind(file_);
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text_.append(buf, n);
      std::fclose(file_);
    }
    return text_;
  }

 private:
  FILE* file_;
  int saved_;
  std::string text_;
};
