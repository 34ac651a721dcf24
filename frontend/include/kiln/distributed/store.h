// Rendezvous stores: the small key/value service the processes of a job use to find each
// other before any tensor moves (PyTorch's TCPStore/FileStore, Gloo's rendezvous::Store).
//
//   TcpStore: rank 0 serves it on KILN_MASTER_ADDR:KILN_MASTER_PORT; every rank (rank 0
//             included) is a client. Works across machines.
//   FileStore: one file per key in a folder every rank can see (a shared file system, or
//              /tmp on one machine).
//
// Values are byte strings. Keys are written once per job in practice, but set() overwrites.
// Every wait has a deadline: a rank that never arrives is reported, never waited for forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::distributed {

using Milliseconds = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for some rank to set it. On timeout, throws
  // kiln::Error naming the key, the store and the wait.
  virtual std::string get(const std::string& key, Milliseconds timeout) = 0;
  // Waits until every key exists. Returns the keys still missing at the deadline (empty when
  // all arrived), so the caller can say which ranks did not come.
  virtual std::vector<std::string> wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  // Whether `key` exists now (no waiting).
  virtual bool check(const std::string& key) = 0;
  // Atomically adds `delta` to the integer stored at `key` (0 when absent) and returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // "tcp://host:port" or "file:///path": for messages.
  virtual std::string describe() const = 0;
};

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 29500;  // 0 with is_server: pick a free port (port() tells which)
  bool is_server = false;  // this process also serves the store (rank 0)
  // How long a client keeps retrying to reach the server (the server may start later).
  Milliseconds connect_timeout{std::chrono::seconds(60)};
};

class TcpStore final : public Store {
 public:
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Milliseconds timeout) override;
  std::vector<std::string> wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override;
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class FileStore final : public Store {
 public:
  // `folder` is created when missing. Each key is one file, written to a temporary name and
  // renamed, so a reader never sees half a value.
  explicit FileStore(std::string folder);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Milliseconds timeout) override;
  std::vector<std::string> wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override;

 private:
  std::string path_of(const std::string& key) const;
  std::string folder_;
};

// Keys of `inner` under "prefix/": one store serves several process groups or generations.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  void set(const std::string& key, const std::string& value) override { inner_->set(full(key), value); }
  std::string get(const std::string& key, Milliseconds timeout) override { return inner_->get(full(key), timeout); }
  std::vector<std::string> wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::string& key) override { return inner_->check(full(key)); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(full(key), delta); }
  std::string describe() const override { return inner_->describe() + " (keys under " + prefix_ + "/)"; }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace kiln::distributed
