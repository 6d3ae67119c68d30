"""Each step names what saturated, from its own figures, in the order a reader checks them."""

from results.rundir.bottleneck import NONE_VISIBLE, bottleneck, bottleneck_lines, limits
from results.rundir.steps import StepRow

MEMBER = "surge-local-1-0@localhost"


def row(**figures):
    base = {"step": 1, "label": "1", "sent_rate": 1000.0, "received_rate": 1000.0,
            "cpu_percent": {MEMBER: 40.0}, "cpu_quota_cores": {MEMBER: 0.5},
            "agents_cpu_percent": {"0": 30.0}}
    return StepRow(**{**base, **figures})


def test_nothing_saturated_is_said_so():
    assert bottleneck(row()) == NONE_VISIBLE


def test_a_member_at_its_quota_and_not_below_it():
    assert bottleneck(row(cpu_percent={MEMBER: 46.0})) == \
        "member surge-local-1-0 at its CPU quota (46% of 50%)"
    assert bottleneck(row(cpu_percent={MEMBER: 44.0})) == NONE_VISIBLE
    # no quota (unlimited) or no CPU figure: never a quota limit
    assert bottleneck(row(cpu_percent={MEMBER: 180.0}, cpu_quota_cores={})) == NONE_VISIBLE
    assert bottleneck(row(cpu_percent={})) == NONE_VISIBLE


def test_the_load_generator_and_the_receivers():
    assert bottleneck(row(agents_cpu_percent={"0": 30.0, "1": 97.0})) == \
        "load generator: agent 1 at 97% of a core"
    # 100 msg/s short for 10 s: the queues hold at least half of it, or it is held before them
    assert bottleneck(row(received_rate=900.0, seconds=10, max_backlog=800)) == \
        "receivers behind: 900 of 1,000 sent per second received (queues growing)"
    assert bottleneck(row(received_rate=900.0, seconds=10, max_backlog=100)) == (
        "broker intake behind: 900 of 1,000 sent per second received, the backlog held "
        "before the queues (their depth stayed under 100)")
    assert bottleneck(row(received_rate=960.0)) == NONE_VISIBLE
    assert bottleneck(row(sent_rate=0.0, received_rate=500.0)) == NONE_VISIBLE  # a drain


def test_the_network_at_its_link_each_way_where_the_link_is_known():
    at_link = row(network_in_mbps={MEMBER: 950.0}, network_out_mbps={MEMBER: 120.0},
                  network_link_mbps={MEMBER: 1000.0})
    assert bottleneck(at_link) == "network: member surge-local-1-0 in at 950.0 of 1,000 Mb/s"
    assert bottleneck(row(network_in_mbps={MEMBER: 10.0}, network_out_mbps={MEMBER: 95.0},
                          network_link_mbps={MEMBER: 100.0})) == \
        "network: member surge-local-1-0 out at 95.0 of 100 Mb/s"
    assert bottleneck(row(network_in_mbps={MEMBER: 890.0}, network_out_mbps={MEMBER: 0.0},
                          network_link_mbps={MEMBER: 1000.0})) == NONE_VISIBLE
    # a link nobody gave, or traffic nobody measured, never names the network
    assert bottleneck(row(network_in_mbps={MEMBER: 5000.0})) == NONE_VISIBLE
    assert bottleneck(row(network_link_mbps={MEMBER: 1.0})) == NONE_VISIBLE


def test_a_busy_host_is_named_with_whose_it_is():
    assert bottleneck(row(host_cpu_percent=95.0)) == \
        "this host at 95% of its cores (the load generator's and the members)"
    assert bottleneck(row(host_cpu_percent=60.0, hosts_cpu_percent={"mq1": 92.0})) == \
        "broker host mq1 at 92% of its cores"
    assert bottleneck(row(host_cpu_percent=89.0)) == NONE_VISIBLE


def test_several_limits_come_in_order_and_reach_every_view():
    saturated = row(blocked_s=12.0, cpu_percent={MEMBER: 50.0}, received_rate=400.0,
                    seconds=5, max_backlog=3000)
    assert [text.split(" ")[0] for text in limits(saturated)] == \
        ["publishers", "member", "receivers"]
    assert saturated.as_json()["bottleneck"].startswith(
        "publishers blocked by the broker for 12 agent-seconds; member")
    alarmed = row(blocked_s=6.0, memory_alarm_seconds={MEMBER: 4, "other@h": 0})
    assert bottleneck(alarmed) == ("publishers blocked by the broker for 6 agent-seconds "
                                   "(memory alarm on surge-local-1-0 4 s)")
    assert bottleneck_lines([saturated, row(label="2")])[1] == "step 2: none visible"
