#include "sgshim.h"

#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <string>
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

int pp_sg_star_cluster(unsigned n, double bytes_per_s, double latency_s)
{
  try {
    simgrid::s4u::NetZone *zone = simgrid::s4u::create_star_zone("cluster");
    for (unsigned i = 0; i < n; i++) {
      std::string id = std::to_string(i);
      simgrid::s4u::Host *h = zone->create_host("host" + id, 1e9);
      simgrid::s4u::Link *down = zone->create_link("down" + id, bytes_per_s);
      down->set_latency(latency_s)->seal();
      h->seal();
      /* nothing on the way out (the NIC serialises its egress), the port link on the way in */
      zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {}, false);
      zone->add_route(nullptr, h->get_netpoint(), nullptr, nullptr,
                      {simgrid::s4u::LinkInRoute(down)}, false);
    }
    zone->seal();
  } catch (const std::exception &) {
    return 0;
  }
  return 1;
}
