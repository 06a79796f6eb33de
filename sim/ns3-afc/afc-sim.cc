// SPDX-License-Identifier: GPL-2.0-only
//
// afc-sim: a packet-level reproduction of AFC (Adaptive Flow Control, the Sanadhya thesis on
// ultra-mobile computing, chapter III) in ns-3 3.37, built against Debian's libns3-dev by
// scripts/build-ns3-afc and run by `roam lab afc --sim`. It links ns-3 and is therefore GPL-2.0
// (see LICENSE beside it); the rest of roam only runs it and reads its CSV.
//
// Three receive-side behaviours (--system, or per flow in the dumbbell):
//   ns3  ns-3.37's TcpSocketBase unchanged. Its Recv() sends no window update after the
//        application reads (fixed upstream only after 3.37), so a closed window reopens only
//        by the sender's persist probe (6 s, doubling): shown to measure the defect.
//   tcp  TcpSocketWu: TcpSocketBase plus the window update Linux sends after a read
//        (__tcp_cleanup_rbuf in net/ipv4/tcp.c: ACK when the window has at least doubled).
//        This is the "default TCP" baseline: the thesis's comparison without the straw man.
//   afc  AfcTcpSocket: TcpSocketWu plus the thesis's Algorithms 1-4 (§3.4):
//        - receiver: a read-rate sample on each data arrival (Alg. 1 l.30) and each application
//          read (Alg. 3 l.8), smooth_rx = h*smooth_rx + (1-h)*bytes/elapsed, h = 0.5 (Alg. 2);
//          the rate rides on every segment the receiver sends (the thesis's TCP option, here a
//          packet tag in Kbps: no ns-3 header code is copied or changed, and the option's bytes
//          are not charged on the wire); a proactive ACK after a read when smooth_rx leaves
//          [lower, upper] x the rate last advertised (the spec's decision: the printed condition
//          `> factor || < factor` is always true);
//        - sender: flow window = awnd + rx * srtt when srtt > 0, sends up to min(cwnd, that)
//          (Alg. 4); zero-window events (awnd below one segment: NS2 counts windows in
//          packets, so its awnd = 0 is a window with no room for one): while the window is
//          closed congestion signals are ignored; when
//          the window reopens outside fast recovery, ts_recover = now, everything sent past
//          the cumulative ACK is marked lost so sending restarts there (snd_nxt = highest ack),
//          the retransmit timer is reset, and duplicate ACKs count only if their timestamp echo
//          is after ts_recover; persist probes only when the flow window is 0;
//        - burst control: when (snd_una + window) - snd_nxt exceeds --burst segments the
//          sender paces, its pacing rate capped at window / srtt (ns-3's pacer). The thesis
//          gives no threshold. The default, 64 segments (93 KB), paces the thesis's motivating
//          case, a whole window released when a blocked sender's window reopens, in every
//          scenario of Table 4 (the smallest buffer is 88 segments), and leaves ACK-clocked
//          sending alone. Our first default, 4, paced AFC's flows nearly always, and behind a
//          shallow drop-tail queue paced flows took the unpaced default flows' share
//          (docs/results/notebook.md, 2026-11-27, second session).
//        Overflow is ns-3's own: TcpRxBuffer refuses bytes past its buffer and the socket still
//        ACKs (Alg. 1 l.3-4).
//
// One defect of ns-3.37 is worked around for every system (TcpSocketWu::AvailableWindow and
// SendDataPacket): it could offer a zero-byte segment, and crash, when the bytes sent equal
// the peer's window. Another for `tcp` and `afc` (TcpSocketWu::ReTxTimeout): its
// retransmission timer expires with nothing in flight when a window below one segment stalls
// the sender, and restarts it from one segment; Linux stops the timer then.
//
// The bottleneck's queue (--queue, default 1000 packets, Linux's default txqueuelen and the
// deep buffers of cellular links) is not given by the thesis; `roam lab afc --sim` also runs
// Table 4 with 100 packets, where network losses, not flow control, limit every system.
// --qdisc: ns-3's Ipv4AddressHelper::Assign puts its default queue disc, FQ-CoDel, above every
// device that has none; NS2, the thesis's simulator, has only the link's drop-tail queue. So
// `droptail` (the default) removes the queue discs after the addresses are assigned, and the
// device's drop-tail queue of --queue packets is the bottleneck's only buffer, as in NS2;
// `fqcodel` keeps ns-3's default (what runs before 2026-11-27 had, unknowingly).
//
// Topologies: `link` (one sender, one receiver, the network's rate pattern on the link, one-way
// delay rtt/2) and `dumbbell` (the thesis's Fig. 4: n senders at 10 Mbit/s, 5 ms to router 1,
// the bottleneck to router 2 with the rate pattern and rtt/2 - 10 ms, 10 Mbit/s, 5 ms to each
// receiver). Every receiving application reads by the read profile: every --tick it takes what
// the current rate allows, nothing banked. Output: one CSV line per flow on stdout.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

// ---------------------------------------------------------------------------------------------
// Rate patterns: <x, y, y> Mbit/s, one value per slot, repeating.

struct Pattern
{
    std::vector<double> mbps;
    Time slot;
    Time phase; // added to the clock before indexing: a trial's offset into the pattern

    double At(Time t) const
    {
        int64_t i = (t + phase).GetNanoSeconds() / slot.GetNanoSeconds();
        return mbps[static_cast<size_t>(i % static_cast<int64_t>(mbps.size()))];
    }

    double Mean() const
    {
        double s = 0;
        for (double m : mbps)
        {
            s += m;
        }
        return s / mbps.size();
    }
};

bool
ParsePattern(const std::string& text, std::vector<double>* out, std::string* err)
{
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ','))
    {
        char* end = nullptr;
        double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 100000)
        {
            *err = "`" + item + "` in `" + text + "` is not a rate in Mbit/s (0 to 100000)";
            return false;
        }
        out->push_back(v);
    }
    if (out->empty())
    {
        *err = "an empty rate pattern";
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// The read rate on the wire (the thesis's AFC option).

class AfcTag : public Tag
{
  public:
    uint32_t kbps = 0;

    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("roam::AfcTag").SetParent<Tag>().AddConstructor<AfcTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return 4;
    }

    void Serialize(TagBuffer b) const override
    {
        b.WriteU32(kbps);
    }

    void Deserialize(TagBuffer b) override
    {
        kbps = b.ReadU32();
    }

    void Print(std::ostream& os) const override
    {
        os << "afc-rx=" << kbps << "Kbps";
    }
};

// ---------------------------------------------------------------------------------------------
// TcpSocketWu: ns-3's TCP with the window update after a read that Linux sends.

class TcpSocketWu : public TcpSocketBase
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("roam::TcpSocketWu")
                                .SetParent<TcpSocketBase>()
                                .AddConstructor<TcpSocketWu>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    TcpSocketWu() = default;
    TcpSocketWu(const TcpSocketWu&) = default;

    /// Unread bytes held (in order and out of order).
    uint32_t Held() const
    {
        return m_tcb->m_rxBuffer->Size();
    }

    Ptr<Packet> Recv(uint32_t maxSize, uint32_t flags) override
    {
        Ptr<Packet> p = TcpSocketBase::Recv(maxSize, flags);
        uint32_t n = p ? p->GetSize() : 0;
        if (n > 0)
        {
            AfterRead(n);
        }
        return p;
    }

    /// For --trace: the sender's view.
    std::string State() const
    {
        std::ostringstream o;
        o << "cwnd=" << m_tcb->m_cWnd.Get() << " rwnd=" << m_rWnd.Get()
          << " win=" << Window() << " inflight=" << BytesInFlight()
          << " una=" << m_txBuffer->HeadSequence() << " nxt=" << m_tcb->m_nextTxSequence.Get()
          << " state=" << TcpStateName[m_state.Get()]
          << " cong=" << TcpSocketState::TcpCongStateName[m_tcb->m_congState.Get()];
        return o.str();
    }

    /// ns-3.37 defect, worked around for every system: when the bytes sent and unacknowledged
    /// equal the peer's window while some are SACKed or lost (so fewer are in flight), the
    /// window looks open, TcpTxBuffer::NextSeg offers new data with no room (seqHigh == seq),
    /// and SendDataPacket dereferences the null item it gets for 0 bytes. The window is closed
    /// in exactly that case.
    uint32_t AvailableWindow() const override
    {
        uint32_t w = TcpSocketBase::AvailableWindow();
        if (w == 0)
        {
            return 0;
        }
        SequenceNumber32 seq;
        SequenceNumber32 high;
        bool rule3 = m_sackEnabled && m_tcb->m_congState == TcpSocketState::CA_RECOVERY;
        if (m_txBuffer->NextSeg(&seq, &high, rule3) && high == seq)
        {
            return 0;
        }
        return w;
    }

    /// The same defect reaches DoRetransmit, which asks for NextSeg's zero-byte segment: it
    /// resends the head instead, as DoRetransmit itself does when nothing is marked lost.
    uint32_t SendDataPacket(SequenceNumber32 seq, uint32_t maxSize, bool withAck) override
    {
        if (maxSize == 0)
        {
            seq = m_txBuffer->HeadSequence();
            maxSize = m_tcb->m_segmentSize;
            m_tcb->m_nextTxSequence = seq;
        }
        if (m_txBuffer->SizeFromSequence(seq) == 0)
        {
            return 0;
        }
        return TcpSocketBase::SendDataPacket(seq, maxSize, withAck);
    }

    /// ns-3.37 re-arms the retransmission timer on every new ACK, even the one that leaves
    /// nothing in flight, and treats its expiry as a loss whenever the send buffer holds data:
    /// a sender stalled by a window below one segment (not zero, so no persist probe) times
    /// out with nothing outstanding and restarts from one segment. Linux stops the timer when
    /// nothing is in flight (tcp_rearm_rto); so does this, for every system but `ns3`.
    void ReTxTimeout() override
    {
        if (m_linuxRto && m_state == ESTABLISHED &&
            m_txBuffer->HeadSequence() >= m_tcb->m_highTxMark)
        {
            return;
        }
        TcpSocketBase::ReTxTimeout();
    }

    uint64_t windowUpdates = 0;
    uint64_t zeroWindowAcks = 0;
    uint64_t notStored = 0;

  protected:
    SequenceNumber32 m_advEdge{0}; // the right edge of the window last advertised
    bool m_linuxRto = true;        // no retransmission timeout with nothing in flight

    Ptr<TcpSocketBase> Fork() override
    {
        return CopyObject<TcpSocketWu>(this);
    }

    /// The window the receiver could advertise now.
    uint32_t RcvWindow() const
    {
        return static_cast<uint32_t>(m_tcb->m_rxBuffer->MaxRxSequence() -
                                     m_tcb->m_rxBuffer->NextRxSequence());
    }

    /// What remains of the window last advertised (Linux's tcp_receive_window()).
    uint32_t AdvertisedLeft() const
    {
        int32_t left = m_advEdge - m_tcb->m_rxBuffer->NextRxSequence();
        return left > 0 ? static_cast<uint32_t>(left) : 0;
    }

    void SendEmptyPacket(uint8_t flags) override
    {
        TcpSocketBase::SendEmptyPacket(flags);
        m_advEdge = m_tcb->m_rxBuffer->NextRxSequence() + m_advWnd.Get();
    }

    /// Linux's rule (__tcp_cleanup_rbuf): after a read, ACK if the window the receiver could
    /// advertise is at least twice what remains of the one it advertised last.
    virtual void AfterRead(uint32_t /* bytes */)
    {
        uint32_t after = RcvWindow();
        if (m_state == ESTABLISHED && after >= m_tcb->m_segmentSize &&
            after >= 2 * AdvertisedLeft())
        {
            windowUpdates++;
            SendEmptyPacket(TcpHeader::ACK);
        }
    }

    void ReceivedData(Ptr<Packet> p, const TcpHeader& h) override
    {
        SequenceNumber32 next = m_tcb->m_rxBuffer->NextRxSequence();
        uint32_t size = m_tcb->m_rxBuffer->Size();
        TcpSocketBase::ReceivedData(p, h);
        if (p->GetSize() > 0 && next == m_tcb->m_rxBuffer->NextRxSequence() &&
            size == m_tcb->m_rxBuffer->Size())
        {
            notStored++; // beyond the buffer (Alg. 1 l.3-4), or a duplicate
        }
        if (RcvWindow() < m_tcb->m_segmentSize)
        {
            zeroWindowAcks++;
        }
    }
};

NS_OBJECT_ENSURE_REGISTERED(TcpSocketWu);

// A plain ns-3 socket with the counters (its Recv() sends no window update).
class TcpSocketPlain : public TcpSocketWu
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("roam::TcpSocketPlain")
                                .SetParent<TcpSocketWu>()
                                .AddConstructor<TcpSocketPlain>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    TcpSocketPlain()
    {
        m_linuxRto = false;
    }

  protected:
    Ptr<TcpSocketBase> Fork() override
    {
        return CopyObject<TcpSocketPlain>(this);
    }

    void AfterRead(uint32_t) override
    {
    }
};

NS_OBJECT_ENSURE_REGISTERED(TcpSocketPlain);

// ---------------------------------------------------------------------------------------------
// AfcTcpSocket: the thesis's Algorithms 1-4.

/// AFC's parameters from the command line (--history, --upper, --lower, --burst), read by
/// every AFC socket when it is made (before 2026-11-27 the first three were parsed but never
/// applied; no experiment had varied them).
struct AfcParams
{
    double history = 0.5;
    double upper = 1.25;
    double lower = 0.8;
    uint32_t burstSegments = 64;
};

AfcParams g_afc;

class AfcTcpSocket : public TcpSocketWu
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("roam::AfcTcpSocket")
                                .SetParent<TcpSocketWu>()
                                .AddConstructor<AfcTcpSocket>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    // ns-3's send buffer lets new data go only within the peer's window (TcpTxBuffer::NextSeg
    // asks GetRWnd through a callback): AFC's sender asks for its flow window instead.
    AfcTcpSocket()
    {
        m_txBuffer->SetRWndCallback(MakeCallback(&AfcTcpSocket::FlowWindow32, this));
    }

    AfcTcpSocket(const AfcTcpSocket& other)
        : TcpSocketWu(other)
    {
        history = other.history;
        upper = other.upper;
        lower = other.lower;
        burstSegments = other.burstSegments;
        m_txBuffer->SetRWndCallback(MakeCallback(&AfcTcpSocket::FlowWindow32, this));
    }

    double history = g_afc.history; // h of Alg. 2
    double upper = g_afc.upper;     // proactive update when smooth_rx > upper * advertised
    double lower = g_afc.lower;     // ... or < lower * advertised
    uint32_t burstSegments = g_afc.burstSegments;

    uint64_t proactiveAcks = 0;
    uint64_t zeroWindowEvents = 0;
    uint64_t suppressedDupAcks = 0;
    uint64_t suppressedTimeouts = 0;

    /// The Tx trace: every segment this socket sends carries its smoothed read rate.
    static void TagTx(Ptr<const Packet> p, const TcpHeader&, Ptr<const TcpSocketBase> s)
    {
        Ptr<const AfcTcpSocket> afc = DynamicCast<const AfcTcpSocket>(s);
        if (!afc || !afc->m_receiving)
        {
            return;
        }
        AfcTag tag;
        tag.kbps = static_cast<uint32_t>(std::min(afc->m_smoothRx * 8 / 1000, 4.0e9));
        const_cast<AfcTcpSocket*>(PeekPointer(afc))->m_advertisedRx = tag.kbps * 1000.0 / 8;
        p->AddPacketTag(tag);
    }

  protected:
    Ptr<TcpSocketBase> Fork() override
    {
        return CopyObject<AfcTcpSocket>(this);
    }

    /// Alg. 2: one sample per call; a call with no time elapsed only moves last_read.
    void ArUpdate(uint32_t bytes)
    {
        Time now = Simulator::Now();
        double elapsed = (now - m_lastRead).GetSeconds();
        if (elapsed > 0)
        {
            m_smoothRx = history * m_smoothRx + (1 - history) * bytes / elapsed;
        }
        m_lastRead = now;
    }

    /// Alg. 1 l.30-31: a sample on arrival (the application reads only by Recv, so the bytes
    /// read at arrival are 0, and the buffer holds data once this segment is in it). Taken
    /// before ns-3 builds the ACK, so the ACK carries it.
    void ReceivedData(Ptr<Packet> p, const TcpHeader& h) override
    {
        m_receiving = true;
        if (p->GetSize() > 0 || Held() > 0)
        {
            ArUpdate(0);
        }
        TcpSocketWu::ReceivedData(p, h);
    }

    /// Alg. 3: a sample on each read, the window update, then a proactive ACK when the rate
    /// has left [lower, upper] x the rate last advertised.
    void AfterRead(uint32_t bytes) override
    {
        ArUpdate(bytes);
        uint64_t updates = windowUpdates;
        TcpSocketWu::AfterRead(bytes);
        bool sent = windowUpdates != updates;
        if (!sent && m_state == ESTABLISHED &&
            (m_smoothRx > upper * m_advertisedRx || m_smoothRx < lower * m_advertisedRx))
        {
            proactiveAcks++;
            SendEmptyPacket(TcpHeader::ACK);
        }
    }

    /// Alg. 4 l.4-6: the flow window.
    uint64_t FlowWindow() const
    {
        uint64_t w = m_rWnd.Get();
        double rtt = m_rtt->GetEstimate().GetSeconds();
        if (rtt > 0)
        {
            w += static_cast<uint64_t>(m_peerRx * rtt);
        }
        return w;
    }

    uint32_t FlowWindow32() const
    {
        return static_cast<uint32_t>(std::min<uint64_t>(FlowWindow(), UINT32_MAX));
    }

    uint32_t Window() const override
    {
        return static_cast<uint32_t>(
            std::min<uint64_t>(FlowWindow(), m_tcb->m_cWnd.Get()));
    }

    /// Alg. 4 at the sender.
    void ReceivedAck(Ptr<Packet> packet, const TcpHeader& h) override
    {
        AfcTag tag;
        if (packet->PeekPacketTag(tag))
        {
            m_peerRx = tag.kbps * 1000.0 / 8;
        }
        bool recovery = m_tcb->m_congState == TcpSocketState::CA_RECOVERY;
        // NS2 counts windows in packets: its awnd = 0 is a window with no room for a segment.
        bool closed = m_rWnd.Get() < m_tcb->m_segmentSize;
        if (closed && !m_zw)
        {
            m_zw = true;
            zeroWindowEvents++;
        }
        else if (!closed && m_zw)
        {
            m_zw = false;
            if (!recovery)
            {
                // Restart from the cumulative ACK: what was sent past it while the window was
                // closed was dropped by the receiver (SACK marks are kept).
                m_tsRecover = TcpOptionTS::NowToTsValue();
                m_txBuffer->SetSentListLost(false);
                m_tcb->m_nextTxSequence = m_txBuffer->HeadSequence();
                m_retxEvent.Cancel();
                m_retxEvent = Simulator::Schedule(m_rto, &AfcTcpSocket::ReTxTimeout, this);
            }
        }
        Pace();
        bool dup = h.GetAckNumber() == m_txBuffer->HeadSequence() && packet->GetSize() == 0;
        if (FlowWindow() > 0 && !recovery && dup && (m_zw || EchoBefore(h, m_tsRecover)))
        {
            // A duplicate ACK for data sent during a zero-window event: keep its SACK
            // information, ignore it as a congestion signal (Alg. 4 l.26-29).
            suppressedDupAcks++;
            uint32_t sacked = 0;
            ReadOptions(h, &sacked);
            SendPendingData(m_connected);
            return;
        }
        TcpSocketWu::ReceivedAck(packet, h);
    }

    /// While the window is closed, a retransmission timeout is one more congestion signal
    /// the thesis suppresses ("all congestion indicators are suppressed", §3.4.2): what is
    /// outstanding was dropped by a full receiver, not the network. The timer is re-armed,
    /// doubling as probes do, and the reopening ACK restarts sending from the cumulative ACK.
    void ReTxTimeout() override
    {
        if (m_zw && m_state == ESTABLISHED)
        {
            suppressedTimeouts++;
            m_rto = std::min(Time(2 * m_rto.Get()), Seconds(60));
            m_retxEvent = Simulator::Schedule(m_rto, &AfcTcpSocket::ReTxTimeout, this);
            return;
        }
        TcpSocketWu::ReTxTimeout();
    }

    /// Probes only when the flow window is closed: AR * RTT keeps it open otherwise.
    void PersistTimeout() override
    {
        if (FlowWindow() > 0)
        {
            SendPendingData(m_connected);
            return;
        }
        TcpSocketWu::PersistTimeout();
    }

  private:
    /// Burst control: pace when the window opens by more than burstSegments at once.
    void Pace()
    {
        double rtt = m_rtt->GetEstimate().GetSeconds();
        uint32_t w = Window();
        SequenceNumber32 edge = m_txBuffer->HeadSequence() + w;
        int64_t opening = static_cast<int64_t>(edge.GetValue()) -
                          static_cast<int64_t>(m_tcb->m_nextTxSequence.Get().GetValue());
        bool burst = rtt > 0 && opening > static_cast<int64_t>(burstSegments) *
                                              static_cast<int64_t>(m_tcb->m_segmentSize);
        m_tcb->m_pacing = burst;
        if (burst)
        {
            m_tcb->m_maxPacingRate = DataRate(static_cast<uint64_t>(w * 8.0 / rtt) + 1);
            m_tcb->m_pacingRate = m_tcb->m_maxPacingRate;
        }
    }

    static bool EchoBefore(const TcpHeader& h, uint32_t ts)
    {
        if (ts == 0 || !h.HasOption(TcpOption::TS))
        {
            return false;
        }
        Ptr<const TcpOptionTS> opt = DynamicCast<const TcpOptionTS>(h.GetOption(TcpOption::TS));
        return opt && opt->GetEcho() <= ts;
    }

    // receiver
    bool m_receiving = false;
    double m_smoothRx = 0;     // bytes/s
    double m_advertisedRx = 0; // bytes/s, the last rate put on a segment
    Time m_lastRead{};
    // sender
    double m_peerRx = 0; // bytes/s
    bool m_zw = false;
    uint32_t m_tsRecover = 0;
};

NS_OBJECT_ENSURE_REGISTERED(AfcTcpSocket);

// ---------------------------------------------------------------------------------------------
// Sockets and applications.

Ptr<TcpSocketWu>
MakeSocket(Ptr<Node> node, const std::string& system)
{
    Ptr<TcpSocketWu> s;
    if (system == "afc")
    {
        s = CreateObject<AfcTcpSocket>();
        s->TraceConnectWithoutContext("Tx", MakeCallback(&AfcTcpSocket::TagTx));
    }
    else if (system == "ns3")
    {
        s = CreateObject<TcpSocketPlain>();
    }
    else
    {
        s = CreateObject<TcpSocketWu>();
    }
    s->SetNode(node);
    s->SetTcp(node->GetObject<TcpL4Protocol>());
    s->SetRtt(CreateObject<RttMeanDeviation>());
    s->SetCongestionControlAlgorithm(CreateObject<TcpNewReno>());
    s->SetRecoveryAlgorithm(CreateObject<TcpClassicRecovery>());
    return s;
}

/// Always has data: keeps the socket's send buffer full.
class BulkSender : public Application
{
  public:
    Ptr<TcpSocketWu> socket;
    Address peer;

  private:
    void StartApplication() override
    {
        socket->Bind();
        socket->SetConnectCallback(MakeCallback(&BulkSender::Connected, this),
                                   MakeNullCallback<void, Ptr<Socket>>());
        socket->SetSendCallback(MakeCallback(&BulkSender::Fill, this));
        socket->Connect(peer);
    }

    void StopApplication() override
    {
    }

    void Connected(Ptr<Socket> s)
    {
        Fill(s, s->GetTxAvailable());
    }

    void Fill(Ptr<Socket> s, uint32_t)
    {
        while (s->GetTxAvailable() > 0)
        {
            uint32_t n = std::min<uint32_t>(s->GetTxAvailable(), 64 * 1024);
            if (s->Send(Create<Packet>(n)) <= 0)
            {
                break;
            }
        }
    }
};

/// Accepts one connection and reads it by the read profile: every tick what the rate allows,
/// nothing banked. Samples what the receiver holds unread.
class ProfileReader : public Application
{
  public:
    Ptr<TcpSocketWu> listener;
    Pattern profile;
    Time tick = MilliSeconds(1);
    uint64_t bytesRead = 0;
    uint32_t peakHeld = 0;
    Ptr<TcpSocketWu> conn;

  private:
    void StartApplication() override
    {
        listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                    MakeCallback(&ProfileReader::Accepted, this));
        Simulator::Schedule(tick, &ProfileReader::Read, this);
    }

    void StopApplication() override
    {
    }

    void Accepted(Ptr<Socket> s, const Address&)
    {
        conn = DynamicCast<TcpSocketWu>(s);
    }

    void Read()
    {
        if (conn)
        {
            peakHeld = std::max(peakHeld, conn->Held());
            double budget = profile.At(Simulator::Now()) * 1e6 / 8 * tick.GetSeconds();
            uint32_t left = static_cast<uint32_t>(budget);
            while (left > 0)
            {
                Ptr<Packet> p = conn->Recv(left, 0);
                if (!p || p->GetSize() == 0)
                {
                    break;
                }
                bytesRead += p->GetSize();
                left -= p->GetSize();
            }
        }
        Simulator::Schedule(tick, &ProfileReader::Read, this);
    }
};

void
Trace(Ptr<ProfileReader> r, Ptr<BulkSender> s, Time every)
{
    std::cerr << Simulator::Now().GetSeconds() << " read=" << r->bytesRead
              << " held=" << (r->conn ? r->conn->Held() : 0) << " " << s->socket->State()
              << std::endl;
    Simulator::Schedule(every, &Trace, r, s, every);
}

/// Changes a device's rate by the network's pattern at each slot boundary.
void
SetRate(Ptr<PointToPointNetDevice> dev, Pattern net)
{
    dev->SetDataRate(DataRate(static_cast<uint64_t>(std::max(net.At(Simulator::Now()), 0.001) * 1e6)));
    Time now = Simulator::Now() + net.phase;
    Time next = net.slot - Time(now.GetNanoSeconds() % net.slot.GetNanoSeconds());
    Simulator::Schedule(next, &SetRate, dev, net);
}

int
Fail(const std::string& what)
{
    std::cerr << "afc-sim: " << what << std::endl;
    return 2;
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string topology = "link";
    std::string system = "afc";
    std::string others = "tcp";
    std::string readText = "0,6,6";
    std::string netText = "2";
    double rttS = 0.53;
    double readSlotRtts = 1;
    uint32_t buffer = 128000;
    double duration = 600;
    uint32_t flows = 10;
    uint32_t afcFlows = 0;
    uint32_t seed = 1;
    uint32_t queuePackets = 1000;
    double upper = 1.25;
    double lower = 0.8;
    double history = 0.5;
    bool trace = false;
    std::string qdisc = "droptail";

    CommandLine cmd(__FILE__);
    cmd.AddValue("topology", "link or dumbbell", topology);
    cmd.AddValue("system", "link: ns3, tcp or afc", system);
    cmd.AddValue("others", "dumbbell: the non-AFC flows' system (ns3 or tcp)", others);
    cmd.AddValue("afcFlows", "dumbbell: how many of the flows are AFC", afcFlows);
    cmd.AddValue("flows", "dumbbell: flows", flows);
    cmd.AddValue("read", "read profile, Mbit/s per slot, e.g. 0,6,6", readText);
    cmd.AddValue("net", "network rate pattern, Mbit/s per RTT, e.g. 2,4,4", netText);
    cmd.AddValue("rtt", "round-trip propagation delay (s)", rttS);
    cmd.AddValue("readSlot", "the read profile's slot, in RTTs", readSlotRtts);
    cmd.AddValue("buffer", "receive buffer (bytes)", buffer);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("seed", "trial seed: the reader's offset into its profile", seed);
    cmd.AddValue("queue", "bottleneck queue (packets)", queuePackets);
    cmd.AddValue("qdisc", "droptail (NS2's: the device queue only) or fqcodel (ns-3's default)",
                 qdisc);
    cmd.AddValue("upper", "AFC proactive update's upper factor", upper);
    cmd.AddValue("lower", "AFC proactive update's lower factor", lower);
    cmd.AddValue("history", "AFC's EWMA history factor h", history);
    uint32_t burst = 64;
    cmd.AddValue("burst",
                 "AFC's burst control: pace when the window opens by more than this many "
                 "segments (the thesis gives no threshold)",
                 burst);
    cmd.AddValue("trace", "print the first flow's state every RTT on stderr", trace);
    cmd.Parse(argc, argv);

    auto known = [](const std::string& s) { return s == "ns3" || s == "tcp" || s == "afc"; };
    if (topology != "link" && topology != "dumbbell")
    {
        return Fail("--topology: `" + topology + "` (expected link or dumbbell)");
    }
    if (!known(system) || !known(others))
    {
        return Fail("--system/--others: expected ns3, tcp or afc");
    }
    if (qdisc != "droptail" && qdisc != "fqcodel")
    {
        return Fail("--qdisc: `" + qdisc + "` (expected droptail or fqcodel)");
    }
    if (!(rttS >= 0.002 && rttS <= 10) || !(duration > 0 && duration <= 1e5) ||
        !(readSlotRtts > 0 && readSlotRtts <= 1000) || buffer < 1448 || flows == 0 ||
        flows > 100 || afcFlows > flows || !(history >= 0 && history < 1) || !(upper >= 1) ||
        !(lower > 0 && lower <= 1) || queuePackets == 0)
    {
        return Fail("an option is out of range (rtt 0.002-10 s, duration <= 1e5 s, buffer >= "
                    "1448, flows 1-100, afcFlows <= flows, 0 <= history < 1, upper >= 1, 0 < "
                    "lower <= 1, queue > 0)");
    }
    if (burst == 0)
    {
        return Fail("--burst: at least 1 segment");
    }
    g_afc = AfcParams{history, upper, lower, burst};
    Pattern read;
    Pattern net;
    std::string err;
    if (!ParsePattern(readText, &read.mbps, &err) || !ParsePattern(netText, &net.mbps, &err))
    {
        return Fail("--read/--net: " + err);
    }
    Time rtt = Seconds(rttS);
    read.slot = Seconds(rttS * readSlotRtts);
    net.slot = rtt;
    RngSeedManager::SetSeed(seed);
    Ptr<UniformRandomVariable> u = CreateObject<UniformRandomVariable>();

    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(buffer));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::DropTailQueue<Packet>::MaxSize",
                       QueueSizeValue(QueueSize(std::to_string(queuePackets) + "p")));

    bool dumbbell = topology == "dumbbell";
    uint32_t n = dumbbell ? flows : 1;
    NodeContainer senders;
    NodeContainer receivers;
    NodeContainer routers;
    senders.Create(n);
    receivers.Create(n);
    InternetStackHelper stack;
    stack.Install(senders);
    stack.Install(receivers);
    Ipv4AddressHelper ip;
    std::vector<Ipv4Address> receiverAddr(n);
    std::vector<Ptr<PointToPointNetDevice>> bottleneck;
    PointToPointHelper p2p;
    if (!dumbbell)
    {
        p2p.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
        p2p.SetChannelAttribute("Delay", TimeValue(rtt / 2));
        NetDeviceContainer d = p2p.Install(senders.Get(0), receivers.Get(0));
        ip.SetBase("10.1.0.0", "255.255.255.0");
        Ipv4InterfaceContainer ifs = ip.Assign(d);
        receiverAddr[0] = ifs.GetAddress(1);
        bottleneck.push_back(DynamicCast<PointToPointNetDevice>(d.Get(0)));
    }
    else
    {
        if (rtt / 2 <= MilliSeconds(10))
        {
            return Fail("--rtt: the dumbbell needs more than 20 ms (its access links take 20)");
        }
        routers.Create(2);
        stack.Install(routers);
        p2p.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
        p2p.SetChannelAttribute("Delay", TimeValue(rtt / 2 - MilliSeconds(10)));
        NetDeviceContainer core = p2p.Install(routers.Get(0), routers.Get(1));
        ip.SetBase("10.0.0.0", "255.255.255.0");
        ip.Assign(core);
        bottleneck.push_back(DynamicCast<PointToPointNetDevice>(core.Get(0)));
        p2p.SetChannelAttribute("Delay", TimeValue(MilliSeconds(5)));
        for (uint32_t i = 0; i < n; i++)
        {
            NetDeviceContainer a = p2p.Install(senders.Get(i), routers.Get(0));
            NetDeviceContainer b = p2p.Install(routers.Get(1), receivers.Get(i));
            std::string sa = "10.1." + std::to_string(i + 1) + ".0";
            std::string sb = "10.2." + std::to_string(i + 1) + ".0";
            ip.SetBase(sa.c_str(), "255.255.255.0");
            ip.Assign(a);
            ip.SetBase(sb.c_str(), "255.255.255.0");
            receiverAddr[i] = ip.Assign(b).GetAddress(1);
        }
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    }
    if (qdisc == "droptail")
    {
        // See --qdisc above: every device's drop-tail queue alone, as NS2's links have.
        for (uint32_t i = 0; i < NodeList::GetNNodes(); i++)
        {
            Ptr<Node> node = NodeList::GetNode(i);
            Ptr<TrafficControlLayer> tc = node->GetObject<TrafficControlLayer>();
            for (uint32_t j = 0; tc && j < node->GetNDevices(); j++)
            {
                Ptr<NetDevice> dev = node->GetDevice(j);
                if (tc->GetRootQueueDiscOnDevice(dev))
                {
                    tc->DeleteRootQueueDiscOnDevice(dev);
                }
            }
        }
    }
    for (auto& dev : bottleneck)
    {
        Simulator::Schedule(Seconds(0), &SetRate, dev, net);
    }

    std::vector<std::string> kinds(n);
    std::vector<Ptr<ProfileReader>> readers(n);
    for (uint32_t i = 0; i < n; i++)
    {
        kinds[i] = dumbbell ? (i < afcFlows ? "afc" : others) : system;
        uint16_t port = 5000 + i;
        Ptr<TcpSocketWu> listener = MakeSocket(receivers.Get(i), kinds[i]);
        listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
        listener->Listen();
        Ptr<ProfileReader> r = CreateObject<ProfileReader>();
        r->listener = listener;
        r->profile = read;
        // Each flow and trial starts at its own point of the read profile.
        r->profile.phase = Seconds(u->GetValue(0, read.slot.GetSeconds() * read.mbps.size()));
        receivers.Get(i)->AddApplication(r);
        r->SetStartTime(Seconds(0));
        readers[i] = r;
        Ptr<BulkSender> s = CreateObject<BulkSender>();
        s->socket = MakeSocket(senders.Get(i), kinds[i]);
        s->peer = InetSocketAddress(receiverAddr[i], port);
        senders.Get(i)->AddApplication(s);
        s->SetStartTime(Seconds(0.01 * i));
        if (trace && i == 0)
        {
            Simulator::Schedule(rtt, &Trace, r, s, rtt);
        }
    }
    Simulator::Stop(Seconds(duration));
    Simulator::Run();

    std::cout << "flow,system,bytes_read,goodput_mbps,peak_held_bytes,window_updates,"
                 "proactive_acks,zero_window_acks,not_stored,zero_window_events,"
                 "suppressed_dupacks\n";
    for (uint32_t i = 0; i < n; i++)
    {
        Ptr<ProfileReader> r = readers[i];
        Ptr<TcpSocketWu> c = r->conn;
        Ptr<AfcTcpSocket> afc = DynamicCast<AfcTcpSocket>(c);
        // The sender's counters live in the sender's socket: reach it through the app.
        Ptr<BulkSender> s = DynamicCast<BulkSender>(senders.Get(i)->GetApplication(0));
        Ptr<AfcTcpSocket> afcSender = DynamicCast<AfcTcpSocket>(s->socket);
        std::cout << i << "," << kinds[i] << "," << r->bytesRead << ","
                  << r->bytesRead * 8 / duration / 1e6 << "," << r->peakHeld << ","
                  << (c ? c->windowUpdates : 0) << "," << (afc ? afc->proactiveAcks : 0) << ","
                  << (c ? c->zeroWindowAcks : 0) << "," << (c ? c->notStored : 0) << ","
                  << (afcSender ? afcSender->zeroWindowEvents : 0) << ","
                  << (afcSender ? afcSender->suppressedDupAcks : 0) << "\n";
    }
    Simulator::Destroy();
    return 0;
}
