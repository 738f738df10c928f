// A move-only `void()` callable with inline storage, for event callbacks. Small trivially
// copyable callables (lambdas capturing pointers and numbers, as nearly all of the simulator's
// are) are stored inline, moved by copying bytes and never destroyed; other callables of up to
// kSize bytes are stored inline with a manager; larger ones on the heap.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace dtsim {

class Callback {
 public:
  static constexpr std::size_t kSize = 32;

  Callback() = default;
  Callback(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, Callback> && std::is_invocable_r_v<void, D&>>>
  Callback(F&& f) {  // NOLINT(google-explicit-constructor)
    if constexpr (sizeof(D) <= kSize && alignof(D) <= alignof(std::max_align_t) && std::is_trivially_copyable_v<D> &&
                  std::is_trivially_destructible_v<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      invoke_ = [](void* p) { (*static_cast<D*>(p))(); };
    } else if constexpr (sizeof(D) <= kSize && alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      invoke_ = [](void* p) { (*static_cast<D*>(p))(); };
      manage_ = [](void* dst, void* src) {
        if (src != nullptr) ::new (dst) D(std::move(*static_cast<D*>(src)));
        static_cast<D*>(src != nullptr ? src : dst)->~D();
      };
    } else {
      D* heap = new D(std::forward<F>(f));
      std::memcpy(buf_, &heap, sizeof heap);
      invoke_ = [](void* p) {
        D* d;
        std::memcpy(&d, p, sizeof d);
        (*d)();
      };
      manage_ = [](void* dst, void* src) {
        if (src != nullptr) {
          std::memcpy(dst, src, sizeof(D*));  // the pointer moves; the callable stays put
          return;
        }
        D* d;
        std::memcpy(&d, dst, sizeof d);
        delete d;
      };
    }
  }

  Callback(Callback&& o) noexcept { take(o); }
  Callback& operator=(Callback&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  Callback(const Callback&) = delete;
  Callback& operator=(const Callback&) = delete;
  ~Callback() { reset(); }

  void operator()() { invoke_(buf_); }
  explicit operator bool() const { return invoke_ != nullptr; }
  void reset() {
    if (manage_ != nullptr) manage_(buf_, nullptr);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

 private:
  void take(Callback& o) {
    if (o.manage_ != nullptr) o.manage_(buf_, o.buf_);
    else std::memcpy(buf_, o.buf_, kSize);
    invoke_ = o.invoke_;
    manage_ = o.manage_;
    o.invoke_ = nullptr;
    o.manage_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char buf_[kSize] = {};
  void (*invoke_)(void*) = nullptr;
  void (*manage_)(void* dst, void* src) = nullptr;  // src != null: move src into dst; else destroy dst
};

}  // namespace dtsim
