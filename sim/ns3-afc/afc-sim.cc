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
//        - the network's losses (--congestion, AfcTcpSocket::NetworkLoss): with `echo` (the
//          default) every data segment carries its transmission number (a packet tag), the
//          receiver counts the numbers the network skipped and echoes the count with the rate,
//          and the sender halves its window on a new count, once per window, even during a
//          zero-window event: the thesis's suppression (above) then forgives only the
//          receiver's own drops, which is what it is for. `thesis`: Alg. 4 as printed, which
//          also forgives the network's losses while flow control recovers; with a reader idle
//          one slot in three that is always, and one AFC flow took a shallow shared queue;
//        - burst control (--pace, --burst, AfcTcpSocket::Pace): when (snd_una + window) -
//          snd_nxt exceeds a threshold the sender paces, its pacing rate capped at window /
//          srtt (ns-3's pacer). The thesis gives no threshold. `fixed`: --burst segments
//          (64, 93 KB), which paces the thesis's motivating case, a whole window released when
//          a blocked sender's window reopens, in every scenario of Table 4 (the smallest buffer
//          is 88 segments), and leaves ACK-clocked sending alone. `room` (the default): the
//          same, but when the receiver's whole buffer is smaller than --burst (short round
//          trips, the dumbbell's 22 KB), its advertised window, so that a burst the receiver
//          cannot hold goes at the window's rate. Our first default, a fixed 4, paced AFC's
//          flows nearly always; behind a shallow drop-tail queue they then took the unpaced
//          default flows' share (docs/results/notebook.md, 2026-11-27, second session), which
//          with `echo` they no longer do.
//        Overflow is ns-3's own: TcpRxBuffer refuses bytes past its buffer and the socket still
//        ACKs (Alg. 1 l.3-4); ns-3.37 drops a segment wholly beyond the window before any
//        overridable code, so TcpSocketWu::Arrived counts those (not_stored).
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
    /// With --congestion=echo: how many of the peer's data segments the network lost, as
    /// this receiver counted them (gaps in AfcTxTag's numbers), cumulative.
    uint32_t networkLosses = 0;

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
        return 8;
    }

    void Serialize(TagBuffer b) const override
    {
        b.WriteU32(kbps);
        b.WriteU32(networkLosses);
    }

    void Deserialize(TagBuffer b) override
    {
        kbps = b.ReadU32();
        networkLosses = b.ReadU32();
    }

    void Print(std::ostream& os) const override
    {
        os << "afc-rx=" << kbps << "Kbps net-losses=" << networkLosses;
    }
};

/// With --congestion=echo, on every data segment an AFC sender transmits: its transmission
/// number (0, 1, 2, ... per connection, retransmissions included). The path is FIFO, so a
/// receiver that sees a number skipped knows the network lost that transmission, whatever its
/// sequence number; a segment the receiver itself drops for lack of room still arrives with
/// its number, so the receiver's own drops never count. Like AfcTag, a packet tag: no header
/// bytes are charged.
class AfcTxTag : public Tag
{
  public:
    uint32_t index = 0;

    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("roam::AfcTxTag").SetParent<Tag>().AddConstructor<AfcTxTag>();
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
        b.WriteU32(index);
    }

    void Deserialize(TagBuffer b) override
    {
        index = b.ReadU32();
    }

    void Print(std::ostream& os) const override
    {
        os << "afc-tx=" << index;
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
    uint64_t bytesSent = 0; // data bytes transmitted, retransmissions included

  protected:
    SequenceNumber32 m_advEdge{0}; // the right edge of the window last advertised
    bool m_linuxRto = true;        // no retransmission timeout with nothing in flight

    Ptr<TcpSocketBase> Fork() override
    {
        return CopyObject<TcpSocketWu>(this);
    }

    /// Every data segment sent passes here (ns-3 calls it from SendDataPacket).
    void UpdateRttHistory(const SequenceNumber32& seq, uint32_t sz, bool isRetransmission) override
    {
        bytesSent += sz;
        TcpSocketBase::UpdateRttHistory(seq, sz, isRetransmission);
    }

    /// ns-3.37 drops a data segment that lies wholly beyond the receive window (Alg. 1 l.3-4)
    /// in ForwardUp (IsValidTcpSegment: it ACKs it and returns) before any overridable code
    /// sees it, so a receiver counting drops in ReceivedData never sees those. The accepted
    /// connection's endpoint is pointed at Arrived, which sees every segment first.
    void CompleteFork(Ptr<Packet> p,
                      const TcpHeader& h,
                      const Address& from,
                      const Address& to) override
    {
        TcpSocketBase::CompleteFork(p, h, from, to);
        if (m_endPoint)
        {
            m_endPoint->SetRxCallback(
                MakeCallback(&TcpSocketWu::Arrived, Ptr<TcpSocketWu>(this)));
        }
    }

    void Arrived(Ptr<Packet> packet, Ipv4Header ip, uint16_t port, Ptr<Ipv4Interface> iface)
    {
        TcpHeader h;
        uint32_t headerSize = packet->PeekHeader(h);
        uint32_t len = packet->GetSize() - headerSize;
        bool beyond = len > 0 && m_state == ESTABLISHED &&
                      m_tcb->m_rxBuffer->MaxRxSequence() <= h.GetSequenceNumber();
        if (beyond)
        {
            notStored++; // beyond the buffer: dropped (and ACKed) by ForwardUp
        }
        if (len > 0)
        {
            DataArrived(packet, beyond);
        }
        ForwardUp(packet, ip, port, iface);
    }

    /// A data segment has reached this socket; `dropped`: it lies beyond the receive window
    /// and ns-3 is about to drop it. Called before ns-3 processes (or ACKs) it.
    virtual void DataArrived(Ptr<const Packet>, bool /* dropped */)
    {
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
            notStored++; // partly beyond the buffer, or a duplicate (wholly beyond: Arrived)
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
    bool echoLosses = true; // --congestion=echo (the default) or thesis
    bool paceRoom = true;   // --pace=room (the default) or fixed
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
        echoLosses = other.echoLosses;
        paceRoom = other.paceRoom;
        m_txBuffer->SetRWndCallback(MakeCallback(&AfcTcpSocket::FlowWindow32, this));
    }

    double history = g_afc.history; // h of Alg. 2
    double upper = g_afc.upper;     // proactive update when smooth_rx > upper * advertised
    double lower = g_afc.lower;     // ... or < lower * advertised
    uint32_t burstSegments = g_afc.burstSegments;
    bool echoLosses = g_afc.echoLosses;
    bool paceRoom = g_afc.paceRoom;

    uint64_t proactiveAcks = 0;
    uint64_t zeroWindowEvents = 0;
    uint64_t suppressedDupAcks = 0;
    uint64_t suppressedTimeouts = 0;
    uint32_t networkLosses = 0; // receiver: the peer's transmissions the network lost
    uint64_t lossEchoCuts = 0;  // sender: window halvings on the receiver's loss echo

    /// The Tx trace: every segment this socket sends as a receiver carries its smoothed read
    /// rate (and, with --congestion=echo, the network losses it has counted); every data
    /// segment it sends carries its transmission number.
    static void TagTx(Ptr<const Packet> p, const TcpHeader&, Ptr<const TcpSocketBase> s)
    {
        Ptr<const AfcTcpSocket> afc = DynamicCast<const AfcTcpSocket>(s);
        if (!afc)
        {
            return;
        }
        AfcTcpSocket* self = const_cast<AfcTcpSocket*>(PeekPointer(afc));
        if (afc->echoLosses && p->GetSize() > 0)
        {
            AfcTxTag tx;
            tx.index = self->m_txIndex++;
            p->AddPacketTag(tx);
        }
        if (!afc->m_receiving)
        {
            return;
        }
        AfcTag tag;
        tag.kbps = static_cast<uint32_t>(std::min(afc->m_smoothRx * 8 / 1000, 4.0e9));
        tag.networkLosses = afc->networkLosses;
        self->m_advertisedRx = tag.kbps * 1000.0 / 8;
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

    /// With --congestion=echo: a skipped transmission number is a segment the network lost
    /// (the path is FIFO). Counted before ns-3 ACKs the segment, so that ACK reports it.
    void DataArrived(Ptr<const Packet> p, bool) override
    {
        AfcTxTag tx;
        if (!echoLosses || !p->PeekPacketTag(tx))
        {
            return;
        }
        if (m_rxIndexSeen && tx.index > m_rxNextIndex)
        {
            networkLosses += tx.index - m_rxNextIndex;
        }
        if (!m_rxIndexSeen || tx.index >= m_rxNextIndex)
        {
            m_rxNextIndex = tx.index + 1;
        }
        m_rxIndexSeen = true;
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
        bool lossEcho = false;
        if (packet->PeekPacketTag(tag))
        {
            m_peerRx = tag.kbps * 1000.0 / 8;
            lossEcho = echoLosses && tag.networkLosses > m_peerNetworkLosses;
            m_peerNetworkLosses = std::max(m_peerNetworkLosses, tag.networkLosses);
        }
        if (lossEcho)
        {
            NetworkLoss();
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
    /// --congestion=echo: the receiver saw the network lose one of this sender's segments.
    /// Alg. 4 ignores every congestion signal during a zero-window event and until an ACK
    /// echoes data sent after ts_recover (l.26-29), and restarts from the cumulative ACK
    /// with no cut when the window reopens (l.11-18): the thesis's "downside ... we will not
    /// react to congestion if it occurs during a flow control recovery period", on the
    /// assumption that a persistent congestion shows once flow control lets go (§3.4.1.2).
    /// A reader idle one slot in three never lets go: behind a shallow shared queue an AFC
    /// sender then never left slow start (cwnd 3 MB after 30 s on the dumbbell's 3.3 Mbit/s),
    /// and what the network dropped was resent by each restart unpunished (docs/results/
    /// notebook.md, "2026-11-29: AFC behind shallow queues"). Judging the losses by the
    /// sender alone cannot work there: at a zero-window ACK every outstanding segment was
    /// sent beyond the advertised window, so the network's losses and the receiver's look
    /// alike. The thesis's alternative, the receiver telling the sender which losses were its
    /// own (§3.4.1.2), needs no second sequence number for congestion control: the receiver
    /// counts the network's losses (DataArrived) and the sender responds to them as to an ECN
    /// echo (RFC 3168 §6.1.2), at most once per window of data and not while ns-3's own fast
    /// recovery or timeout recovery responds: ssthresh = max(2 segments, half the window in
    /// use, min(cwnd, flow window)), and cwnd = ssthresh. Half the window in use, not ns-3's
    /// pipe (which leaves out everything a restart marked lost) nor cwnd alone (ns-3 grows
    /// cwnd on every ACK even when the flow window limits, so halving it may change nothing).
    /// The receiver's own drops are still ignored as congestion signals, as the thesis wants.
    void NetworkLoss()
    {
        TcpSocketState::TcpCongState_t st = m_tcb->m_congState;
        if (st == TcpSocketState::CA_RECOVERY || st == TcpSocketState::CA_LOSS ||
            (m_cutActive && m_txBuffer->HeadSequence() < m_cutEnd))
        {
            return;
        }
        lossEchoCuts++;
        m_tcb->m_ssThresh = m_congestionControl->GetSsThresh(m_tcb, Window());
        m_tcb->m_cWnd = m_tcb->m_ssThresh.Get();
        m_tcb->m_cWndInfl = m_tcb->m_cWnd.Get();
        m_cutEnd = m_tcb->m_highTxMark;
        m_cutActive = true;
    }

    /// Burst control (§3.4.1.4): when (snd_una + window) - snd_nxt exceeds a threshold, every
    /// packet is delayed by RTT / window, here ns-3's pacer at window / srtt. The thesis gives
    /// no threshold. --pace=fixed: --burst segments (64). --pace=room (the default): the same,
    /// unless the receiver's whole buffer (the largest window it has advertised) is smaller
    /// than that; then the receiver's free room (its advertised window, at least a segment).
    /// A fixed threshold lets ACK-clocked bursts into a receiver with room for them, and paces
    /// the thesis's motivating burst, a whole window released when a blocked window reopens;
    /// below the receiver's buffer size it allows bursts no receiver of that size can hold,
    /// absorbed only as fast as the application reads, while AFC's window counts on reading
    /// at AR over a round trip (Alg. 4 l.5: awnd + AR * RTT). At RTT 10 ms (buffer 5 KB, 3.5
    /// segments) 64 never paced, the link (15 Mbit/s) delivered each window faster than the
    /// reader (6 Mbit/s) took it, and AFC read 0.58-0.85x default TCP (docs/results/
    /// notebook.md, "2026-11-29: AFC behind shallow queues"); with room, 1.10-1.17x. A fixed 4
    /// also paced there but cost Table 4's scenarios 4 and 5 16-20% (seed 1, 300 s); the free
    /// room as the threshold whatever the buffer cost scenario 4 8% (seed 4, 600 s), scenario
    /// 5 21% (seed 5) and RTT 200 ms 8%: with a buffer of 64 segments or more the threshold
    /// stays fixed, and Table 4 paces exactly as before.
    void Pace()
    {
        double rtt = m_rtt->GetEstimate().GetSeconds();
        uint32_t w = Window();
        SequenceNumber32 edge = m_txBuffer->HeadSequence() + w;
        int64_t opening = static_cast<int64_t>(edge.GetValue()) -
                          static_cast<int64_t>(m_tcb->m_nextTxSequence.Get().GetValue());
        int64_t segment = m_tcb->m_segmentSize;
        int64_t threshold = static_cast<int64_t>(burstSegments) * segment;
        m_maxRWnd = std::max(m_maxRWnd, m_rWnd.Get());
        if (paceRoom && m_maxRWnd < threshold)
        {
            threshold = std::max<int64_t>(m_rWnd.Get(), segment);
        }
        bool burst = rtt > 0 && opening > threshold;
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
    bool m_rxIndexSeen = false;
    uint32_t m_rxNextIndex = 0; // the transmission number expected next
    // sender
    double m_peerRx = 0; // bytes/s
    bool m_zw = false;
    uint32_t m_tsRecover = 0;
    uint32_t m_maxRWnd = 0;           // the largest window the receiver has advertised
    uint32_t m_txIndex = 0;           // the next data segment's transmission number
    uint32_t m_peerNetworkLosses = 0; // the receiver's count, as last echoed
    bool m_cutActive = false;         // a loss-echo cut was made; none until una passes m_cutEnd
    SequenceNumber32 m_cutEnd{0};
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
                 "segments (the thesis gives no threshold; see --pace)",
                 burst);
    std::string congestion = "echo";
    cmd.AddValue("congestion",
                 "AFC's congestion signals: echo (the receiver counts the network's losses of "
                 "the peer's segments and the sender halves its window on them, once per "
                 "window, even in a zero-window event) or thesis (Alg. 4 as printed: every "
                 "signal ignored during a zero-window event and until ts_recover)",
                 congestion);
    std::string pace = "room";
    cmd.AddValue("pace",
                 "AFC's burst threshold: room (--burst segments, or the receiver's "
                 "advertised window when its whole buffer is smaller than that) or fixed "
                 "(--burst segments)",
                 pace);
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
    if (congestion != "echo" && congestion != "thesis")
    {
        return Fail("--congestion: `" + congestion + "` (expected echo or thesis)");
    }
    if (pace != "room" && pace != "fixed")
    {
        return Fail("--pace: `" + pace + "` (expected room or fixed)");
    }
    g_afc = AfcParams{history, upper, lower, burst, congestion == "echo", pace == "room"};
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
                 "suppressed_dupacks,bytes_sent,network_losses,loss_echo_cuts\n";
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
                  << (afcSender ? afcSender->suppressedDupAcks : 0) << "," << s->socket->bytesSent
                  << "," << (afc ? afc->networkLosses : 0) << ","
                  << (afcSender ? afcSender->lossEchoCuts : 0) << "\n";
    }
    Simulator::Destroy();
    return 0;
}
