// gpupool-oci-shim: supervises one container for the agent (see launcher.h).
#include "agent/oci/launcher.h"

int main(int argc, char** argv) { return gpupool::agent::oci::ShimMain(argc, argv); }
