#include "common/tool.h"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "core/error.h"

namespace hetrl::apps {
namespace {

void print_error(const CLI::App& app, std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), message.c_str());
}

}  // namespace

void usage_error(const std::string& message) { throw core::InputError(message); }

int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(app, e.what());
    return kExitBadInput;
  }
  try {
    return body();
  } catch (const core::InputError& e) {
    print_error(app, e.what());
    return kExitBadInput;
  } catch (const core::JobError& e) {
    print_error(app, e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    print_error(app, fmt::format("internal error: {}", e.what()));
    return kExitFailure;
  }
}

}  // namespace hetrl::apps
