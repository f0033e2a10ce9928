// Task Bench on Taskflow, for causeway's Task Bench harness (bench/taskbench).
//
// Task Bench has no Taskflow implementation; this one is written for this repository against
// Task Bench's core library (core.h: App parses the command line, TaskGraph describes each
// graph and runs and checks each task, App::report_timing prints the figures the harness
// reads) and Taskflow's headers. scripts/taskbench_peers.sh builds it outside the repository,
// against the sources it is given; nothing of either project is copied here.
//
// Every task of every graph becomes one Taskflow task, and every dependency Task Bench lists
// becomes one precede edge from the producing task of the previous timestep, so a task starts
// when its own inputs are ready, not when a whole timestep is. Each task writes its own output
// buffer (no buffer is reused across timesteps, so no edge is needed against a later writer),
// and passes its inputs to TaskGraph::execute_point, which asserts that each input holds the
// (timestep, point) of the dependency it stands for: a task that ran before one of its
// producers reads a zeroed buffer and the run aborts. That check is what makes a broken
// dependency fail loudly; the core must therefore be built without NDEBUG.
//
// Timed, as Task Bench's OpenMP implementation times its task creation: building the Taskflow
// graph (tasks and edges) and running it to its end. The worker count is `-worker N`, as for
// Task Bench's OpenMP implementation.
//
// `-drop-cross-edges` leaves out every edge from another column: a deliberately broken build
// of the graph, so that the harness's failure path can be shown with a real fault.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include <taskflow/taskflow.hpp>

#include "core.h"
#include "timer.h"

namespace {

struct Options {
  long workers = 1;
  bool drop_cross_edges = false;
};

// The flags of this program; App ignores flags it does not know, so both see the same argv.
Options parse_options(int argc, char **argv) {
  Options options;
  for (int index = 1; index < argc; ++index) {
    if (!std::strcmp(argv[index], "-worker")) {
      if (index + 1 >= argc) {
        std::fprintf(stderr, "error: -worker needs a count\n");
        std::exit(2);
      }
      options.workers = std::atol(argv[++index]);
      if (options.workers <= 0) {
        std::fprintf(stderr, "error: -worker must be at least 1\n");
        std::exit(2);
      }
    } else if (!std::strcmp(argv[index], "-drop-cross-edges")) {
      options.drop_cross_edges = true;
    }
  }
  return options;
}

// One graph's buffers: an output per task, and per task the inputs it hands the core.
struct GraphState {
  const TaskGraph *graph;
  std::vector<char> outputs;  // timesteps × max_width outputs, zeroed
  std::vector<char> scratch;  // one scratch area per worker

  char *output(long timestep, long point) {
    return outputs.data() +
           (timestep * graph->max_width + point) * graph->output_bytes_per_task;
  }
};

// The producing points of task (timestep, point): every point Task Bench lists as a
// dependency that holds a task in the previous timestep, in the order the core checks them.
std::vector<long> producers(const TaskGraph &graph, long timestep, long point) {
  std::vector<long> points;
  if (timestep == 0) return points;
  long first = graph.offset_at_timestep(timestep - 1);
  long last = first + graph.width_at_timestep(timestep - 1) - 1;
  long dset = graph.dependence_set_at_timestep(timestep);
  for (const std::pair<long, long> &span : graph.dependencies(dset, point)) {
    for (long producer = span.first; producer <= span.second; ++producer) {
      if (producer >= first && producer <= last) points.push_back(producer);
    }
  }
  return points;
}

void build(tf::Taskflow &flow, GraphState &state, const Options &options,
           tf::Executor &executor) {
  const TaskGraph &graph = *state.graph;
  // The previous timestep's tasks, indexed by point.
  std::vector<tf::Task> previous(graph.max_width), current(graph.max_width);
  for (long timestep = 0; timestep < graph.timesteps; ++timestep) {
    long offset = graph.offset_at_timestep(timestep);
    long width = graph.width_at_timestep(timestep);
    for (long point = offset; point < offset + width; ++point) {
      std::vector<long> inputs = producers(graph, timestep, point);
      tf::Task task = flow.emplace([&state, &executor, timestep, point, inputs]() {
        const TaskGraph &graph = *state.graph;
        size_t bytes = graph.output_bytes_per_task;
        std::vector<const char *> input_pointers;
        std::vector<size_t> input_bytes(inputs.size(), bytes);
        input_pointers.reserve(inputs.size());
        for (long producer : inputs) {
          input_pointers.push_back(state.output(timestep - 1, producer));
        }
        int worker = executor.this_worker_id();
        char *scratch = state.scratch.data() + worker * graph.scratch_bytes_per_task;
        graph.execute_point(timestep, point, state.output(timestep, point), bytes,
                            input_pointers.data(), input_bytes.data(), inputs.size(),
                            scratch, graph.scratch_bytes_per_task);
      });
      for (long producer : inputs) {
        if (options.drop_cross_edges && producer != point) continue;
        previous[producer].precede(task);
      }
      current[point] = task;
    }
    std::swap(previous, current);
  }
}

}  // namespace

int main(int argc, char **argv) {
  Options options = parse_options(argc, argv);
  App app(argc, argv);
  app.display();

  tf::Executor executor(options.workers);
  std::vector<GraphState> states;
  states.reserve(app.graphs.size());
  for (const TaskGraph &graph : app.graphs) {
    GraphState state;
    state.graph = &graph;
    state.outputs.assign(graph.timesteps * graph.max_width * graph.output_bytes_per_task, 0);
    state.scratch.assign(options.workers * graph.scratch_bytes_per_task, 0);
    if (!state.scratch.empty()) {
      TaskGraph::prepare_scratch(state.scratch.data(), state.scratch.size());
    }
    states.push_back(std::move(state));
  }

  Timer::time_start();
  tf::Taskflow flow;
  for (GraphState &state : states) build(flow, state, options, executor);
  executor.run(flow).wait();
  double elapsed = Timer::time_end();
  app.report_timing(elapsed);
  return 0;
}
