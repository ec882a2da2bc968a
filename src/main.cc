#include "memwall/cli/cli.h"

int main(int argc, char** argv) { return memwall::cli::run(argc, argv); }
