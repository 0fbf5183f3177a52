"""cockpit.preflight.ifadvice: NCCL/GLOO_SOCKET_IFNAME syntax, common subnets, and the advice, on plain probe data
(the shape `python -m cockpit.node.probe` reports: name, up, loopback, ipv4 with prefix)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cockpit.fleet.records import Interface
from cockpit.launch.ssh.facts import pick_master_addr
from cockpit.preflight import ifadvice
from cockpit.preflight.ifadvice import GLOO, NCCL
from cockpit.spec.model import parse_spec


def iface(name: str, *ipv4: str, up: bool = True, speed: int | None = None) -> Interface:
    return Interface(name, up, name == "lo", speed_mbps=speed, ipv4=ipv4)


LO = iface("lo", "127.0.0.1/8")


def names(var: str, value: str | None, ifaces: list[Interface]) -> list[str]:
    return [i.name for i in ifadvice.selected(var, value, ifaces)]


def test_nccl_syntax_prefix_exact_exclude_and_lists():
    ifaces = [LO, iface("eth0", "10.0.0.1/24"), iface("eth10", "10.9.0.1/24"), iface("docker0", "172.17.0.1/16"),
              iface("ib0", "10.1.0.1/16")]
    assert names(NCCL, "eth", ifaces) == ["eth0", "eth10"]  # a prefix
    assert names(NCCL, "eth0", ifaces) == ["eth0"]
    assert names(NCCL, "=eth1", ifaces) == []  # exact: eth10 is not eth1
    assert names(NCCL, "eth1", ifaces) == ["eth10"]
    assert names(NCCL, "ib,eth0", ifaces) == ["eth0", "ib0"]
    assert names(NCCL, "^lo,docker", ifaces) == ["eth0", "eth10", "ib0"]
    assert names(NCCL, "^=eth0,lo", ifaces) == ["eth10", "docker0", "ib0"]
    assert names(NCCL, None, ifaces) == ["eth0", "eth10", "ib0"]  # unset: NCCL's default excludes lo, docker


def test_gloo_names_are_exact_and_must_all_exist():
    ifaces = [LO, iface("eth0", "10.0.0.1/24"), iface("eth10", "10.9.0.1/24")]
    assert names(GLOO, "eth", ifaces) == []
    assert names(GLOO, "eth0,eth10", ifaces) == ["eth0", "eth10"]
    assert ifadvice.missing_gloo_names("eth0,ens5", ifaces) == ["ens5"]
    assert names(GLOO, None, ifaces) == []  # unset: gloo goes by the hostname


def test_same_name_everywhere_gives_one_value_for_both():
    nodes = {"a": [LO, iface("eth0", "10.0.0.1/24")], "b": [LO, iface("eth0", "10.0.0.2/24")]}
    advice = ifadvice.advise(nodes)
    assert advice.subnet == "10.0.0.0/24"
    assert advice.values == {NCCL: "eth0", GLOO: "eth0"} and advice.per_node == {}
    assert advice.env_text() == "NCCL_SOCKET_IFNAME=eth0, GLOO_SOCKET_IFNAME=eth0"


def test_different_names_give_an_nccl_list_and_per_node_gloo():
    """NVIDIA/nccl#286: one node calls the NIC eno1, the other ens5; NCCL takes a list, gloo cannot."""
    nodes = {"a": [LO, iface("eno1", "192.168.5.10/24")], "b": [LO, iface("ens5", "192.168.5.11/24")]}
    advice = ifadvice.advise(nodes)
    assert advice.values == {NCCL: "eno1,ens5"}
    assert advice.per_node == {"a": {GLOO: "eno1"}, "b": {GLOO: "ens5"}}
    assert ifadvice.works(NCCL, "eno1,ens5", nodes, advice.subnet)
    assert not ifadvice.works(GLOO, "eno1,ens5", nodes, advice.subnet)


def test_a_prefix_that_would_catch_a_second_network_is_not_proposed():
    """eth0 is the shared subnet; eth01 (another network) would match the prefix 'eth0': use '=eth0'."""
    nodes = {"a": [LO, iface("eth0", "10.0.0.1/24"), iface("eth01", "10.7.0.1/24")],
             "b": [LO, iface("eth0", "10.0.0.2/24")]}
    assert ifadvice.advise(nodes).values[NCCL] == "=eth0"


def test_exclude_form_when_names_differ_and_prefixes_collide():
    nodes = {"a": [LO, iface("net1", "10.0.0.1/24"), iface("net2", "10.5.0.1/24")],
             "b": [LO, iface("net2", "10.0.0.2/24"), iface("net1", "10.6.0.2/24")]}
    advice = ifadvice.advise(nodes)
    # "net1,net2" would take the other network on each node; no exclusion works either (both names are
    # attached to the shared subnet somewhere): one exact name per node.
    assert NCCL not in advice.values
    assert advice.per_node == {"a": {GLOO: "net1", NCCL: "=net1"}, "b": {GLOO: "net2", NCCL: "=net2"}}


def test_docker_bridge_everywhere_is_not_preferred_and_lo_never_counts():
    nodes = {h: [LO, iface("docker0", "172.17.0.1/16"), iface("ib0", f"10.1.0.{i}/16")]
             for i, h in enumerate(("a", "b"), 1)}
    advice = ifadvice.advise(nodes)
    assert advice.subnet == "10.1.0.0/16" and advice.values[NCCL] == "ib0"


def test_faster_shared_network_wins():
    nodes = {h: [LO, iface("eth0", f"10.0.0.{i}/24", speed=1000), iface("ib0", f"10.1.0.{i}/24", speed=100000)]
             for i, h in enumerate(("a", "b"), 1)}
    assert ifadvice.advise(nodes).subnet == "10.1.0.0/24"


def test_no_shared_subnet_says_so_and_down_interfaces_do_not_count():
    nodes = {"a": [LO, iface("eth0", "10.0.0.1/24")], "b": [LO, iface("eth0", "10.0.0.2/24", up=False)]}
    advice = ifadvice.advise(nodes)
    assert advice.subnet is None and "no IPv4 subnet is shared" in advice.reason


def test_one_node_needs_nothing():
    assert ifadvice.advise({"a": [LO]}).values == {}


def test_node_address_follows_the_jobs_interface():
    nodes = {h: [LO, iface("eth0", f"10.0.0.{i}/24"), iface("ib0", f"10.1.0.{i}/24")]
             for i, h in enumerate(("a", "b"), 1)}
    assert ifadvice.node_address("a", nodes, {GLOO: "ib0"}) == "10.1.0.1"
    assert ifadvice.node_address("a", nodes, {NCCL: "=eth0"}) == "10.0.0.1"
    assert ifadvice.node_address("a", nodes) in ("10.0.0.1", "10.1.0.1")
    assert ifadvice.node_address("a", {"a": [LO], "b": [LO]}) is None


def _cluster(draw_names, n):
    return {f"h{i}": [LO, iface(draw_names[i], f"10.3.0.{i + 1}/24")] for i in range(n)}


@given(st.lists(st.sampled_from(["eth0", "eth1", "eno1", "ens5", "ib0", "bond0"]), min_size=2, max_size=5))
def test_whatever_advice_is_given_works_on_every_node(ifnames):
    nodes = _cluster(ifnames, len(ifnames))
    advice = ifadvice.advise(nodes)
    assert advice.subnet == "10.3.0.0/24"
    for var, value in advice.values.items():
        assert ifadvice.works(var, value, nodes, advice.subnet)
    for host, env in advice.per_node.items():
        for var, value in env.items():
            assert ifadvice.works(var, value, {host: nodes[host]}, advice.subnet)
    assert NCCL in advice.values or all(NCCL in env for env in advice.per_node.values())
    assert GLOO in advice.values or all(GLOO in env for env in advice.per_node.values())


def test_an_address_every_node_has_is_no_shared_network_and_bridges_are_never_the_master():
    """docker0 is 172.17.0.1 on every Docker host: a subnet "in common", but each node reaches only itself."""
    docker = iface("docker0", "172.17.0.1/16", speed=10000)
    nodes = {"a": [LO, docker, iface("eth0", "10.0.0.1/24", speed=1000)],
             "b": [LO, docker, iface("eth0", "10.0.0.2/24", speed=1000)]}
    assert list(ifadvice.common_subnets(nodes)) == ["10.0.0.0/24"]
    assert ifadvice.node_address("a", nodes) == "10.0.0.1"
    assert ifadvice.node_address("a", nodes, {NCCL: "docker"}) == "10.0.0.1"
    bridged = {"a": [LO, iface("virbr0", "192.168.122.1/24")], "b": [LO, iface("virbr0", "192.168.122.2/24")]}
    assert list(ifadvice.common_subnets(bridged)) == ["192.168.122.0/24"]
    assert ifadvice.node_address("a", bridged) is None  # the caller keeps the host name
    spec = parse_spec("name: t\nscript: t.py\nlauncher: ssh\nnodes: [a, b]\ngpus: none\n")
    assert pick_master_addr(spec, nodes) == "10.0.0.1"
    assert pick_master_addr(spec, bridged) == "a"


def test_a_bridge_the_node_calls_virtual_is_never_advised_while_a_nic_is_there():
    """The host layout of tests/fixtures/sysnet/: a test bridge (no device) with its own subnet, which every
    node has, next to the NIC eth0. Only where the bridge is the sole network is it advised."""
    def node(br: str, ip: str) -> list[Interface]:
        return [LO, Interface("cpmn1854", True, ipv4=(br,), virtual=True),
                Interface("eth0", True, ipv4=(ip,), virtual=False)]

    nodes = {"a": node("10.233.74.1/24", "192.0.2.2/24"), "b": node("10.233.74.2/24", "192.0.2.3/24")}
    advice = ifadvice.advise(nodes)
    assert advice.subnet == "192.0.2.0/24" and advice.values == {NCCL: "eth0", GLOO: "eth0"}
    only = {h: [i for i in ifaces if i.name != "eth0"] for h, ifaces in nodes.items()}
    assert ifadvice.advise(only).values[NCCL] == "cpmn1854"
    docker = {h: [LO, iface("docker0", f"172.17.0.{n}/16"), iface("eth0", f"10.0.0.{n}/24")]
              for n, h in ((2, "a"), (3, "b"))}  # docker0 on one subnet with different addresses: still not it
    assert ifadvice.advise(docker).values[NCCL] == "eth0"
