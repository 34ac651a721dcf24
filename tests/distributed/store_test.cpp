// The rendezvous stores: TcpStore (server and clients in threads of this process), FileStore
// (threads and forked processes sharing a folder) and PrefixStore over both. Every failure a
// job can meet (a key never set, nobody listening, rank 0 gone) must end in a clear
// kiln::Error within its deadline, never a hang or a SIGPIPE.
#include "kiln/distributed/store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kiln::distributed {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::path(::testing::TempDir()) / "kiln_store_XXXXXX").string();
    const char* made = ::mkdtemp(t.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << t;
    path = made ? made : t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::unique_ptr<TcpStore> serve() {
  TcpStoreOptions o;
  o.port = 0;
  o.is_server = true;
  return std::make_unique<TcpStore>(o);
}

std::unique_ptr<TcpStore> connect_to(uint16_t port, Milliseconds timeout = 5000ms) {
  TcpStoreOptions o;
  o.port = port;
  o.connect_timeout = timeout;
  return std::make_unique<TcpStore>(o);
}

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<Milliseconds>(Clock::now() - t).count();
}

// ---- TcpStore --------------------------------------------------------------------------

TEST(TcpStore, PortZeroPicksAFreePortTheStoreReports) {
  auto server = serve();
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->describe(), "tcp://127.0.0.1:" + std::to_string(server->port()));
  // A second server picks another port, so several jobs on one machine do not collide.
  auto other = serve();
  EXPECT_NE(other->port(), server->port());
}

TEST(TcpStore, ServerAndTwoClientsInThreadsShareKeys) {
  auto server = serve();
  const uint16_t port = server->port();
  std::atomic<int> failures{0};
  auto rank = [&](int r) {
    try {
      auto store = connect_to(port);
      store->set("addr/" + std::to_string(r), "host" + std::to_string(r));
      store->add("arrived", 1);
      // Each rank reads the other's address: both wait for a key the other sets.
      const std::string peer = std::to_string(3 - r);
      if (store->get("addr/" + peer, 5000ms) != "host" + peer) ++failures;
      if (!store->wait({"addr/1", "addr/2"}, 5000ms).empty()) ++failures;
      if (!store->check("addr/" + peer)) ++failures;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
      ++failures;
    }
  };
  std::thread a(rank, 1), b(rank, 2);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server->add("arrived", 0), 2);
  EXPECT_EQ(server->get("arrived", 0ms), "2");  // add keeps decimal text
  EXPECT_EQ(server->add("arrived", -5), -3);
  EXPECT_FALSE(server->check("addr/3"));
  server->set("addr/1", "overwritten");
  EXPECT_EQ(server->get("addr/1", 0ms), "overwritten");
}

TEST(TcpStore, GetWaitsForAValueAnotherRankSetsLater) {
  auto server = serve();
  auto client = connect_to(server->port());
  const auto start = Clock::now();
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    client->set("late", "value");
  });
  EXPECT_EQ(server->get("late", 5000ms), "value");
  later.join();
  EXPECT_GE(ms_since(start), 90);
  EXPECT_LT(ms_since(start), 2000);
}

TEST(TcpStore, GetTimeoutNamesTheKeyTheStoreAndTheWait) {
  auto server = serve();
  const auto start = Clock::now();
  expect_error(
      [&] { server->get("rank/7/addr", 60ms); },
      {"[TcpStore] get(\"rank/7/addr\") timed out after 60 ms", server->describe(), "Fix:"});
  EXPECT_GE(ms_since(start), 55);
  EXPECT_LT(ms_since(start), 2000);
}

TEST(TcpStore, WaitReturnsTheKeysStillMissing) {
  auto server = serve();
  auto client = connect_to(server->port());
  client->set("rank/0", "");
  client->set("rank/2", "x");
  EXPECT_EQ(server->wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 50ms),
            (std::vector<std::string>{"rank/1", "rank/3"}));
  EXPECT_TRUE(server->wait({"rank/0", "rank/2"}, 0ms).empty());
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    client->set("rank/1", "y");
    client->set("rank/3", "z");
  });
  EXPECT_TRUE(server->wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 5000ms).empty());
  later.join();
}

TEST(TcpStore, ConnectTimesOutNamingTheAddressWhenNobodyListens) {
  // A port bound but not listening: connecting is refused, and nobody can take the port
  // while we hold it.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);

  const auto start = Clock::now();
  expect_error([&] { connect_to(port, 300ms); },
               {"could not reach the rendezvous store at tcp://127.0.0.1:" + std::to_string(port),
                "tried for", "is running", "KILN_MASTER_ADDR/KILN_MASTER_PORT", "firewall"});
  EXPECT_GE(ms_since(start), 290);
  EXPECT_LT(ms_since(start), 3000);
  ::close(holder);
}

TEST(TcpStore, ClientWaitsForAServerThatStartsLater) {
  // Find a free port, then start the server on it a little after the client began trying.
  uint16_t port = serve()->port();
  std::unique_ptr<TcpStore> server;
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    TcpStoreOptions o;
    o.port = port;
    o.is_server = true;
    try {
      server = std::make_unique<TcpStore>(o);
      server->set("ready", "1");
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  });
  auto client = connect_to(port, 5000ms);
  EXPECT_EQ(client->get("ready", 5000ms), "1");
  later.join();
}

TEST(TcpStore, ClientPortZeroIsRejected) {
  TcpStoreOptions o;
  o.port = 0;
  expect_error([&] { TcpStore store(o); }, {"got port 0 on a client", "Fix:"});
}

TEST(TcpStore, ServerGoneMakesEveryClientCallFailClearly) {
  auto server = serve();
  auto client = connect_to(server->port());
  client->set("k", "v");
  server.reset();  // rank 0 exits
  const auto start = Clock::now();
  // Reads meet the closed connection; a large write meets the reset one (EPIPE, which
  // would kill the process with SIGPIPE without MSG_NOSIGNAL).
  expect_error([&] { client->get("k", 5000ms); },
               {"the rendezvous store at tcp://127.0.0.1:", "(served by rank 0) is gone",
                "Rank 0 probably exited"});
  expect_error([&] { client->set("big", std::string(4 << 20, 'x')); }, {"is gone"});
  expect_error([&] { client->check("k"); }, {"is gone"});
  expect_error([&] { client->add("n", 1); }, {"is gone"});
  expect_error([&] { client->wait({"k"}, 5000ms); }, {"is gone"});
  EXPECT_LT(ms_since(start), 2000);
}

TEST(TcpStore, LargeWriteAfterServerGoneDoesNotRaiseSigpipe) {
  auto server = serve();
  auto client = connect_to(server->port());
  server.reset();
  // The first send may still be accepted by the kernel; keep writing until the reset
  // connection is noticed. A SIGPIPE would end the test binary here.
  expect_error(
      [&] {
        for (int i = 0; i < 4; ++i) client->set("big", std::string(8 << 20, 'y'));
      },
      {"is gone"});
}

TEST(TcpStore, BinaryKeysAndValuesRoundTrip) {
  auto server = serve();
  auto client = connect_to(server->port());
  std::string value;
  for (int i = 0; i < 256; ++i) value += static_cast<char>(i);
  value += std::string("\0\0end", 5);
  const std::string key("bin\0key/with\nodd\xff", 17);
  client->set(key, value);
  EXPECT_EQ(server->get(key, 0ms), value);
  EXPECT_FALSE(server->check(std::string("bin", 3)));  // the '\0' is part of the key
  client->set("empty", "");
  EXPECT_EQ(server->get("empty", 0ms), "");
  EXPECT_TRUE(server->check("empty"));
  client->set("", "empty key");
  EXPECT_EQ(server->get("", 0ms), "empty key");
}

TEST(TcpStore, LargeValuesRoundTrip) {
  auto server = serve();
  auto client = connect_to(server->port());
  std::string value(5 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>((i * 131) >> 3);
  client->set("weights", value);
  EXPECT_EQ(server->get("weights", 0ms), value);
  EXPECT_EQ(client->get("weights", 0ms), value);
}

TEST(TcpStore, AddIsAtomicAcrossThreadsAndClients) {
  auto server = serve();
  auto client = connect_to(server->port());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    // Two threads share each store, so the client's connection is used concurrently too.
    TcpStore* store = t % 2 ? client.get() : server.get();
    threads.emplace_back([store] {
      for (int i = 0; i < 100; ++i) store->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(client->add("counter", 0), 400);
}

TEST(TcpStore, AddOnTextFailsNamingKeyAndValue) {
  auto server = serve();
  server->set("name", "alice");
  expect_error([&] { server->add("name", 1); },
               {"adding 1 to key \"name\"", "decimal integer", "\"alice\"", "Fix:"});
  // The connection is still usable after the server refused the request.
  EXPECT_EQ(server->add("n", 2), 2);
}

// ---- FileStore -------------------------------------------------------------------------

TEST(FileStore, SetGetCheckWaitAndCreatesTheFolder) {
  TempDir dir;
  const fs::path folder = dir.path / "nested" / "store";
  FileStore store(folder.string());
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_EQ(store.describe(), "file://" + folder.string());
  EXPECT_FALSE(store.check("a"));
  store.set("a", "1");
  EXPECT_TRUE(store.check("a"));
  EXPECT_EQ(store.get("a", 0ms), "1");
  store.set("a", std::string("two\0bytes", 9));
  EXPECT_EQ(store.get("a", 0ms), std::string("two\0bytes", 9));
  EXPECT_EQ(store.wait({"a", "b", "c"}, 20ms), (std::vector<std::string>{"b", "c"}));

  // A second store on the same folder is another rank: it sees the same keys.
  FileStore other(folder.string());
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    other.set("b", "late");
    other.set("c", "");
  });
  EXPECT_EQ(store.get("b", 5000ms), "late");
  EXPECT_TRUE(store.wait({"a", "b", "c"}, 5000ms).empty());
  later.join();

  const std::string big(5 << 20, 'z');
  store.set("big", big);
  EXPECT_EQ(other.get("big", 0ms), big);
}

TEST(FileStore, GetTimeoutNamesTheKeyAndTheFolder) {
  TempDir dir;
  FileStore store(dir.path.string());
  const auto start = Clock::now();
  expect_error([&] { store.get("rank/3", 40ms); },
               {"[FileStore] get(\"rank/3\") timed out after 40 ms", store.describe(), "Fix:"});
  EXPECT_GE(ms_since(start), 35);
}

TEST(FileStore, AnyKeyIsOneFileInsideTheFolder) {
  TempDir dir;
  FileStore store(dir.path.string());
  const std::vector<std::string> keys = {"a/b/c",
                                         "../escape",
                                         "/abs",
                                         ".",
                                         "..",
                                         "",
                                         "A",
                                         "a",
                                         "~",
                                         "%41",
                                         std::string("nul\0key", 7),
                                         std::string(1000, 'k'),
                                         std::string(1000, 'k') + "x",
                                         std::string(300, '/'),
                                         ".lock",
                                         ".tmp.x"};
  for (size_t i = 0; i < keys.size(); ++i) store.set(keys[i], "v" + std::to_string(i));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(store.get(keys[i], 0ms), "v" + std::to_string(i)) << "key #" << i;
  }
  // Nothing escaped the folder or made a sub-folder; no temporary file was left behind.
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    EXPECT_TRUE(entry.is_regular_file()) << entry.path();
    const std::string name = entry.path().filename().string();
    EXPECT_LE(name.size(), 255u);
    if (name != ".lock") ++files;
  }
  EXPECT_EQ(files, keys.size());
  EXPECT_FALSE(fs::exists(dir.path.parent_path() / "escape"));
}

TEST(FileStore, AddIsAtomicAcrossThreads) {
  TempDir dir;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      FileStore store(dir.path.string());  // one store per thread, as one per rank
      for (int i = 0; i < 100; ++i) {
        try {
          store.add("counter", 1);
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  FileStore store(dir.path.string());
  EXPECT_EQ(store.get("counter", 0ms), "400");
  EXPECT_EQ(store.add("counter", -400), 0);
}

TEST(FileStore, AddIsAtomicAcrossProcesses) {
  TempDir dir;
  const std::string folder = dir.path.string();
  std::vector<pid_t> children;
  for (int p = 0; p < 2; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        FileStore store(folder);
        for (int i = 0; i < 100; ++i) store.add("counter", 1);
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  FileStore store(folder);
  for (int i = 0; i < 100; ++i) store.add("counter", 1);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  EXPECT_EQ(store.add("counter", 0), 300);
}

TEST(FileStore, AddOnTextFailsNamingKeyAndValue) {
  TempDir dir;
  FileStore store(dir.path.string());
  store.set("name", "bob");
  expect_error([&] { store.add("name", 1); },
               {"add(\"name\", 1)", "decimal integer", "\"bob\"", "Fix:"});
}

// ---- PrefixStore -----------------------------------------------------------------------

void expect_prefix_store_works(std::shared_ptr<Store> inner) {
  PrefixStore group("pg1", inner);
  group.set("rank/0", "a");
  EXPECT_EQ(inner->get("pg1/rank/0", 0ms), "a");
  EXPECT_TRUE(group.check("rank/0"));
  EXPECT_FALSE(inner->check("rank/0"));
  inner->set("pg1/rank/2", "c");
  EXPECT_EQ(group.get("rank/2", 0ms), "c");
  EXPECT_EQ(group.add("n", 3), 3);
  EXPECT_EQ(inner->add("pg1/n", 1), 4);
  // Missing keys come back as the caller named them.
  EXPECT_EQ(group.wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 20ms),
            (std::vector<std::string>{"rank/1", "rank/3"}));
  EXPECT_TRUE(group.wait({"rank/0", "rank/2"}, 0ms).empty());
  EXPECT_EQ(group.describe(), inner->describe() + " (keys under pg1/)");
  expect_error([&] { group.get("rank/9", 10ms); }, {"pg1/rank/9", inner->describe()});
  // Groups with different prefixes do not see each other's keys.
  PrefixStore other("pg2", inner);
  EXPECT_FALSE(other.check("rank/0"));
}

TEST(PrefixStore, OverFileStore) {
  TempDir dir;
  expect_prefix_store_works(std::make_shared<FileStore>(dir.path.string()));
}

TEST(PrefixStore, OverTcpStore) {
  expect_prefix_store_works(serve());
}

}  // namespace
}  // namespace kiln::distributed
