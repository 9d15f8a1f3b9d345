// spool-micro's entry point: benchmark_main, but with a short default run (0.2 s per
// benchmark instead of Google Benchmark's 0.5 s), since the suite shares two cores with
// everything else. A --benchmark_min_time on the command line still wins: it comes later in
// argv, and the last occurrence of a flag is the one that counts.
#include <benchmark/benchmark.h>

#include <vector>

int main(int argc, char** argv) {
  static char default_min_time[] = "--benchmark_min_time=0.2";
  std::vector<char*> args(argv, argv + argc);
  args.insert(args.begin() + 1, default_min_time);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
