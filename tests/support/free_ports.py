"""free_ports.py N: N free TCP ports on 127.0.0.1, space-separated, picked below the kernel's
ephemeral range as the loader picks them (rpc_pick_endpoint), so that no outgoing connection
takes one before a rank binds it. For the shell test and benchmark libraries."""
import random
import socket
import sys

low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
socks = []
while len(socks) < int(sys.argv[1]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(max(10000, low - 12000), low)))
        socks.append(s)
    except OSError:
        s.close()
print(" ".join(str(s.getsockname()[1]) for s in socks))
