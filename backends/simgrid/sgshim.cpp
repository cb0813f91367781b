#include "sgshim.h"

#include <simgrid/s4u/Comm.hpp>
#include <vector>

int pp_sg_wait_for(sg_comm_t comm, double timeout)
{
  std::vector<simgrid::s4u::CommPtr> comms{simgrid::s4u::CommPtr(comm)};
  ssize_t done = simgrid::s4u::Comm::wait_any_for(comms, timeout);
  if (done != 0)
    return 0;
  intrusive_ptr_release(comm); /* the reference the C handle held */
  return 1;
}
