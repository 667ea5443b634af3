#!/usr/bin/python3
# A stand-in for bluetoothd on routectl's private system bus (shared/SIMULATED-DEVICES.md §2), so
# that both sound servers' own, unmodified bluez5 code meets Bluetooth headsets.
#
# It owns org.bluez on the bus it is given (never the machine's: it refuses to run without
# --address) and offers what PulseAudio 16 and PipeWire 0.3 use: ObjectManager at /, adapter hci0
# (Adapter1 + Media1: RegisterApplication and RegisterEndpoint), ProfileManager1 at /org/bluez,
# devices (Device1) with a remote SBC endpoint (MediaEndpoint1), transports (MediaTransport1) whose
# Acquire hands out one end of an AF_UNIX SOCK_SEQPACKET pair (the other end is drained here), and
# HFP/HSP through the servers' Profile1.NewConnection with one end of an AF_UNIX stream pair, on
# which this plays the headset's side of the service-level connection.
#
# Control, for tests (sim/bluez/btctl wraps it): interface org.routectl.BluezSim1 on /org/bluez,
#   Add(s address, s name, s profiles)   profiles: a2dp | a2dp+hfp | a2dp+hsp | hfp | ...
#   Connect(s address)                   returns once A2DP is configured and the HFP SLC is up
#   ConnectProfile(s address, s profile) one of them only (a2dp, hfp, hsp): HFP after A2DP
#   Disconnect(s address), Remove(s address), Status() -> s, Ready(s what) -> b
# Use the system python3 (python3-dbus, python3-gi).
import argparse
import os
import re
import socket
import sys
import threading
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
OM = "org.freedesktop.DBus.ObjectManager"
PROPS = "org.freedesktop.DBus.Properties"
ADAPTER = "org.bluez.Adapter1"
DEVICE = "org.bluez.Device1"
MEDIA = "org.bluez.Media1"
PROFILE_MANAGER = "org.bluez.ProfileManager1"
ENDPOINT = "org.bluez.MediaEndpoint1"
TRANSPORT = "org.bluez.MediaTransport1"
CONTROL = "org.routectl.BluezSim1"


def uuid16(n):
    return "%08x-0000-1000-8000-00805f9b34fb" % n


A2DP_SOURCE, A2DP_SINK = uuid16(0x110A), uuid16(0x110B)
AVRCP_TARGET, AVRCP_CONTROLLER = uuid16(0x110C), uuid16(0x110E)
HSP_HS, HSP_AG = uuid16(0x1108), uuid16(0x1112)
HFP_HF, HFP_AG = uuid16(0x111E), uuid16(0x111F)
PNP = uuid16(0x1200)

# All SBC features, bitpool 2..53: what a typical headset's sink endpoint offers.
SBC_CAPS = [0xFF, 0xFF, 2, 53]
A2DP_MTU = 895          # a typical L2CAP MTU for an A2DP stream
HF_FEATURES = 0x10      # remote volume control; no codec negotiation (CVSD only), no 3-way calls

ADAPTER_PATH = "/org/bluez/hci0"
ADAPTER_ADDRESS = "00:1A:7D:DA:71:01"

log_t0 = time.monotonic()


def log(*args):
    print("%8.3f" % (time.monotonic() - log_t0), *args, file=sys.stderr, flush=True)


def sv(d):
    return dbus.Dictionary(d, signature="sv")


class Error(dbus.DBusException):
    def __init__(self, name, msg=""):
        super().__init__(msg)
        self._dbus_error_name = name


class BluezObject(dbus.service.Object):
    """An object with interfaces and properties, exported through the ObjectManager."""

    def __init__(self, sim, path, interfaces):
        super().__init__(sim.bus, path)
        self.sim = sim
        self.path = path
        self.interfaces = interfaces  # name -> dict of dbus-typed values

    @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
    def Get(self, iface, name):
        try:
            return self.interfaces[iface][name]
        except KeyError:
            raise Error("org.freedesktop.DBus.Error.InvalidArgs", "no property %s.%s" % (iface, name))

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, iface):
        return sv(self.interfaces.get(iface, {}))

    @dbus.service.method(PROPS, in_signature="ssv")
    def Set(self, iface, name, value):
        if iface not in self.interfaces or name not in self.interfaces[iface]:
            raise Error("org.freedesktop.DBus.Error.InvalidArgs", "no property %s.%s" % (iface, name))
        old = self.interfaces[iface][name]
        self.set_props(iface, {name: type(old)(value)})

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, iface, changed, invalidated):
        pass

    def set_props(self, iface, changes):
        changed = {k: v for k, v in changes.items() if self.interfaces[iface].get(k) != v}
        if changed:
            self.interfaces[iface].update(changed)
            self.PropertiesChanged(iface, sv(changed), dbus.Array([], signature="s"))

    def managed(self):
        return dbus.Dictionary({k: sv(v) for k, v in self.interfaces.items()}, signature="sa{sv}")


class Root(dbus.service.Object):
    def __init__(self, sim):
        super().__init__(sim.bus, "/")
        self.sim = sim

    @dbus.service.method(OM, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        return dbus.Dictionary({o.path: o.managed() for o in self.sim.objects()}, signature="oa{sa{sv}}")

    @dbus.service.signal(OM, signature="oa{sa{sv}}")
    def InterfacesAdded(self, path, interfaces):
        pass

    @dbus.service.signal(OM, signature="oas")
    def InterfacesRemoved(self, path, interfaces):
        pass


class Manager(dbus.service.Object):
    """/org/bluez: ProfileManager1, and the simulator's control interface."""

    def __init__(self, sim):
        super().__init__(sim.bus, "/org/bluez")
        self.sim = sim
        self.path = "/org/bluez"

    def managed(self):
        return dbus.Dictionary({PROFILE_MANAGER: sv({})}, signature="sa{sv}")

    @dbus.service.method(PROFILE_MANAGER, in_signature="osa{sv}", sender_keyword="sender")
    def RegisterProfile(self, path, uuid, options, sender=None):
        log("RegisterProfile", sender, path, uuid)
        self.sim.profiles[str(uuid).lower()] = (sender, str(path))
        self.sim.registered()

    @dbus.service.method(PROFILE_MANAGER, in_signature="o", sender_keyword="sender")
    def UnregisterProfile(self, path, sender=None):
        for uuid, (s, p) in list(self.sim.profiles.items()):
            if s == sender and p == path:
                del self.sim.profiles[uuid]

    @dbus.service.method("org.bluez.AgentManager1", in_signature="os")
    def RegisterAgent(self, path, capability):
        pass

    @dbus.service.method("org.bluez.AgentManager1", in_signature="o")
    def RequestDefaultAgent(self, path):
        pass

    @dbus.service.method("org.bluez.AgentManager1", in_signature="o")
    def UnregisterAgent(self, path):
        pass

    # --- control ---
    @dbus.service.method(CONTROL, in_signature="sss")
    def Add(self, address, name, profiles):
        self.sim.add_device(str(address), str(name), str(profiles))

    @dbus.service.method(CONTROL, in_signature="s", async_callbacks=("ok", "err"))
    def Connect(self, address, ok, err):
        self.sim.device(address).connect(None, ok, err)

    @dbus.service.method(CONTROL, in_signature="ss", async_callbacks=("ok", "err"))
    def ConnectProfile(self, address, profile, ok, err):
        """One profile only (a2dp, hfp, hsp): a headset whose HFP comes up after its A2DP."""
        device = self.sim.device(address)
        if str(profile) not in device.profiles:
            return err(Error("org.bluez.Error.NotAvailable", "profile not supported"))
        device.connect(str(profile), ok, err)

    @dbus.service.method(CONTROL, in_signature="s", async_callbacks=("ok", "err"))
    def Disconnect(self, address, ok, err):
        self.sim.device(address).disconnect(ok, err)

    @dbus.service.method(CONTROL, in_signature="s", async_callbacks=("ok", "err"))
    def Remove(self, address, ok, err):
        self.sim.remove_device(str(address), ok, err)

    @dbus.service.method(CONTROL, out_signature="s")
    def Status(self):
        return self.sim.status()

    @dbus.service.method(CONTROL, in_signature="s", out_signature="b")
    def Ready(self, what):
        """Whether the sound server has registered what a2dp (an SBC source endpoint) or hfp (the
        HFP audio gateway profile) needs."""
        return all(self.sim.ready_for(p) for p in str(what).split("+") if p)


class Adapter(BluezObject):
    def __init__(self, sim):
        super().__init__(sim, ADAPTER_PATH, {
            ADAPTER: {
                "Address": dbus.String(ADAPTER_ADDRESS), "AddressType": dbus.String("public"),
                "Name": dbus.String("routectl-sim"), "Alias": dbus.String("routectl-sim"),
                "Class": dbus.UInt32(0x7C010C), "Powered": dbus.Boolean(True),
                "Discoverable": dbus.Boolean(False), "DiscoverableTimeout": dbus.UInt32(180),
                "Pairable": dbus.Boolean(True), "PairableTimeout": dbus.UInt32(0),
                "Discovering": dbus.Boolean(False),
                "UUIDs": dbus.Array([A2DP_SOURCE, A2DP_SINK, AVRCP_TARGET, AVRCP_CONTROLLER,
                                     HSP_AG, HFP_AG, PNP], signature="s"),
                "Modalias": dbus.String("usb:v1D6Bp0246d0542"),
                "Roles": dbus.Array(["central", "peripheral"], signature="s"),
            },
            MEDIA: {"SupportedUUIDs": dbus.Array([A2DP_SOURCE, A2DP_SINK], signature="s")},
        })

    @dbus.service.method(ADAPTER)
    def StartDiscovery(self):
        pass

    @dbus.service.method(ADAPTER)
    def StopDiscovery(self):
        pass

    @dbus.service.method(ADAPTER, in_signature="a{sv}")
    def SetDiscoveryFilter(self, f):
        pass

    @dbus.service.method(ADAPTER, in_signature="o")
    def RemoveDevice(self, path):
        pass

    @dbus.service.method(MEDIA, in_signature="oa{sv}", sender_keyword="sender")
    def RegisterEndpoint(self, path, props, sender=None):
        log("RegisterEndpoint", sender, path, props.get("UUID"), props.get("Codec"))
        self.sim.add_endpoint(sender, str(path), props)

    @dbus.service.method(MEDIA, in_signature="o", sender_keyword="sender")
    def UnregisterEndpoint(self, path, sender=None):
        self.sim.endpoints = [e for e in self.sim.endpoints if (e["sender"], e["path"]) != (sender, path)]

    @dbus.service.method(MEDIA, in_signature="oa{sv}", sender_keyword="sender",
                         async_callbacks=("ok", "err"))
    def RegisterApplication(self, path, options, sender=None, ok=None, err=None):
        # As bluetoothd: read the application's endpoints before answering.
        log("RegisterApplication", sender, path)

        def got(objects):
            for p, ifaces in objects.items():
                if ENDPOINT in ifaces:
                    self.sim.add_endpoint(sender, str(p), ifaces[ENDPOINT])
            ok()

        def failed(e):
            log("RegisterApplication: GetManagedObjects failed:", e)
            err(Error("org.bluez.Error.InvalidArguments", str(e)))

        self.sim.bus.get_object(sender, path, introspect=False).GetManagedObjects(
            dbus_interface=OM, reply_handler=got, error_handler=failed)

    @dbus.service.method(MEDIA, in_signature="o", sender_keyword="sender")
    def UnregisterApplication(self, path, sender=None):
        self.sim.endpoints = [e for e in self.sim.endpoints
                              if e["sender"] != sender or not e["path"].startswith(str(path))]

    @dbus.service.method("org.bluez.BatteryProviderManager1", in_signature="o")
    def RegisterBatteryProvider(self, path):
        pass

    @dbus.service.method("org.bluez.BatteryProviderManager1", in_signature="o")
    def UnregisterBatteryProvider(self, path):
        pass


class RemoteEndpoint(BluezObject):
    """The headset's SBC sink endpoint (a SEP)."""

    def __init__(self, device):
        super().__init__(device.sim, device.path + "/sep1", {
            ENDPOINT: {
                "UUID": dbus.String(A2DP_SINK), "Codec": dbus.Byte(0),
                "Capabilities": dbus.Array([dbus.Byte(b) for b in SBC_CAPS], signature="y"),
                "Device": dbus.ObjectPath(device.path), "DelayReporting": dbus.Boolean(False),
            }})
        self.device = device

    @dbus.service.method(ENDPOINT, in_signature="oa{sv}", sender_keyword="sender",
                         async_callbacks=("ok", "err"))
    def SetConfiguration(self, endpoint, props, sender=None, ok=None, err=None):
        # A server choosing the codec itself (codec switching): reconfigure with its endpoint.
        log("remote SetConfiguration from", sender, endpoint)
        local = next((e for e in self.sim.endpoints
                      if e["sender"] == sender and e["path"] == str(endpoint)), None)
        if local is None:
            err(Error("org.bluez.Error.InvalidArguments", "unknown endpoint"))
            return
        config = [int(b) for b in props.get("Capabilities", [])]
        self.device.configure_a2dp(local, config, ok, err)


class Transport(BluezObject):
    def __init__(self, device, n, endpoint, config):
        super().__init__(device.sim, device.path + "/sep1/fd%d" % n, {
            TRANSPORT: {
                "Device": dbus.ObjectPath(device.path), "UUID": dbus.String(endpoint["uuid"]),
                "Codec": dbus.Byte(0),
                "Configuration": dbus.Array([dbus.Byte(b) for b in config], signature="y"),
                "State": dbus.String("idle"), "Volume": dbus.UInt16(127),
                "Endpoint": dbus.ObjectPath(device.path + "/sep1"),
            }})
        self.device = device
        self.endpoint = endpoint  # the server's local endpoint (dict)
        self.sock = None
        self.drained = 0
        self.acquisitions = 0

    def acquire(self):
        self.release_socket()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = mine
        self.acquisitions += 1
        threading.Thread(target=self.drain, args=(mine,), daemon=True).start()
        fd = dbus.types.UnixFd(theirs)  # dbus-python keeps its own duplicate
        theirs.close()
        self.set_props(TRANSPORT, {"State": dbus.String("active")})
        return fd, dbus.UInt16(A2DP_MTU), dbus.UInt16(A2DP_MTU)

    def drain(self, sock):
        # What the headset would decode: count it, never block the server.
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                self.drained += len(data)
        except OSError:
            pass

    def release_socket(self):
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
            self.sock = None

    @dbus.service.method(TRANSPORT, out_signature="hqq")
    def Acquire(self):
        log("Acquire", self.path)
        return self.acquire()

    @dbus.service.method(TRANSPORT, out_signature="hqq")
    def TryAcquire(self):
        log("TryAcquire", self.path)
        return self.acquire()

    @dbus.service.method(TRANSPORT)
    def Release(self):
        log("Release", self.path)
        self.release_socket()
        self.set_props(TRANSPORT, {"State": dbus.String("idle")})


class Rfcomm:
    """The headset's end of an HFP or HSP connection: the HF side of the SLC (AT+BRSF, AT+CIND=?,
    AT+CIND?, AT+CMER), then answers the gateway's codec selection and ignores the rest."""

    def __init__(self, device, profile, sock):
        self.device = device
        self.profile = profile
        self.sock = sock
        self.buf = b""
        self.lines = []
        self.cond = threading.Condition()
        self.closed = False
        self.log = []

    def start(self, done):
        threading.Thread(target=self.run, args=(done,), daemon=True).start()

    def send(self, cmd):
        self.log.append("> " + cmd)
        self.sock.sendall(cmd.encode() + b"\r")

    def reader(self):
        try:
            while True:
                data = self.sock.recv(4096)
                if not data:
                    break
                self.buf += data
                while True:
                    m = re.search(rb"[\r\n]", self.buf)
                    if not m:
                        break
                    line, self.buf = self.buf[:m.start()].decode(errors="replace").strip(), self.buf[m.end():]
                    if not line:
                        continue
                    self.log.append("< " + line)
                    bcs = re.match(r"\+BCS: ?(\d+)", line)
                    if bcs:
                        self.send("AT+BCS=" + bcs.group(1))
                        continue
                    with self.cond:
                        self.lines.append(line)
                        self.cond.notify_all()
        except OSError:
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def command(self, cmd, timeout=3.0):
        with self.cond:
            self.lines.clear()
        self.send(cmd)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if line == "OK" or "ERROR" in line:
                        return line
                if self.closed:
                    raise OSError("connection closed during " + cmd)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OSError("no answer to " + cmd)
                self.cond.wait(left)

    def run(self, done):
        threading.Thread(target=self.reader, daemon=True).start()
        error = None
        try:
            if self.profile == "hfp":
                for cmd in ("AT+BRSF=%d" % HF_FEATURES, "AT+CIND=?", "AT+CIND?", "AT+CMER=3,0,0,1"):
                    answer = self.command(cmd)
                    if answer != "OK":
                        raise OSError("%s: %s" % (cmd, answer))
        except OSError as e:
            error = str(e)
            log("SLC", self.device.address, error, self.log)
        GLib.idle_add(lambda: done(error) and False)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class Device(BluezObject):
    def __init__(self, sim, address, name, profiles):
        path = ADAPTER_PATH + "/dev_" + address.replace(":", "_")
        self.address = address
        self.profiles = profiles  # e.g. {"a2dp", "hfp"}
        uuids = []
        if "a2dp" in profiles:
            uuids += [A2DP_SINK, AVRCP_TARGET, AVRCP_CONTROLLER]
        if "hfp" in profiles:
            uuids.append(HFP_HF)
        if "hsp" in profiles:
            uuids.append(HSP_HS)
        super().__init__(sim, path, {
            DEVICE: {
                "Address": dbus.String(address), "AddressType": dbus.String("public"),
                "Name": dbus.String(name), "Alias": dbus.String(name),
                "Class": dbus.UInt32(0x240404), "Icon": dbus.String("audio-headset"),
                "Paired": dbus.Boolean(True), "Bonded": dbus.Boolean(True),
                "Trusted": dbus.Boolean(True), "Blocked": dbus.Boolean(False),
                "LegacyPairing": dbus.Boolean(False), "Connected": dbus.Boolean(False),
                "ServicesResolved": dbus.Boolean(False),
                "UUIDs": dbus.Array(sorted(uuids), signature="s"),
                "Modalias": dbus.String("bluetooth:v0000p0000d0000"),
                "Adapter": dbus.ObjectPath(ADAPTER_PATH), "WakeAllowed": dbus.Boolean(False),
            }})
        self.remote = RemoteEndpoint(self) if "a2dp" in profiles else None
        self.transport = None
        self.transports = 0
        self.rfcomm = {}  # "hfp"/"hsp" -> Rfcomm

    def children(self):
        return [o for o in (self.remote, self.transport) if o is not None]

    def connected(self):
        return bool(self.interfaces[DEVICE]["Connected"])

    # --- profiles ---
    def configure_a2dp(self, local, config, ok, err):
        """As bluetoothd after AVDTP set-configuration: a new transport, announced to the server's
        endpoint with SetConfiguration."""
        self.clear_a2dp()
        self.transports += 1
        t = Transport(self, self.transports, local, config)
        self.transport = t
        self.sim.root.InterfacesAdded(t.path, t.managed())
        props = sv(t.interfaces[TRANSPORT])
        ep = self.sim.bus.get_object(local["sender"], local["path"], introspect=False)

        def failed(e):
            log("SetConfiguration failed:", e)
            err(e)

        ep.SetConfiguration(dbus.ObjectPath(t.path), props, dbus_interface=ENDPOINT,
                            reply_handler=ok, error_handler=failed)

    def connect_a2dp(self, ok, err):
        local = self.sim.source_endpoint()
        if local is None:
            return err(Error("org.bluez.Error.NotAvailable", "no A2DP source endpoint registered"))
        ep = self.sim.bus.get_object(local["sender"], local["path"], introspect=False)

        def selected(config):
            self.configure_a2dp(local, [int(b) for b in config], ok, err)

        ep.SelectConfiguration(dbus.Array([dbus.Byte(b) for b in SBC_CAPS], signature="y"),
                               dbus_interface=ENDPOINT, reply_handler=selected, error_handler=err)

    def clear_a2dp(self):
        t = self.transport
        if t is None:
            return
        self.transport = None
        t.release_socket()
        t.set_props(TRANSPORT, {"State": dbus.String("idle")})
        ep = self.sim.bus.get_object(t.endpoint["sender"], t.endpoint["path"], introspect=False)
        ep.ClearConfiguration(dbus.ObjectPath(t.path), dbus_interface=ENDPOINT,
                              reply_handler=lambda: None, error_handler=lambda e: None)
        self.sim.root.InterfacesRemoved(t.path, dbus.Array([TRANSPORT], signature="s"))
        t.remove_from_connection()

    def connect_rfcomm(self, profile, ok, err):
        reg = self.sim.profiles.get(HFP_AG if profile == "hfp" else HSP_AG)
        if reg is None:
            return err(Error("org.bluez.Error.NotAvailable", "no %s gateway profile registered" % profile))
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        conn = Rfcomm(self, profile, mine)
        self.rfcomm[profile] = conn
        fd = dbus.types.UnixFd(theirs)
        theirs.close()
        version = 0x0107 if profile == "hfp" else 0x0102
        props = sv({"Version": dbus.UInt16(version), "Features": dbus.UInt16(HF_FEATURES)})
        obj = self.sim.bus.get_object(reg[0], reg[1], introspect=False)

        def slc_done(error):
            if error:
                err(Error("org.bluez.Error.Failed", error))
            else:
                ok()

        def accepted():
            conn.start(slc_done)

        def failed(e):
            log("NewConnection failed:", e)
            self.rfcomm.pop(profile, None)
            conn.close()
            err(e)

        obj.NewConnection(dbus.ObjectPath(self.path), fd, props, dbus_interface="org.bluez.Profile1",
                          reply_handler=accepted, error_handler=failed)

    def disconnect_rfcomm(self, profile):
        conn = self.rfcomm.pop(profile, None)
        if conn is None:
            return
        reg = self.sim.profiles.get(HFP_AG if profile == "hfp" else HSP_AG)
        if reg is not None:
            obj = self.sim.bus.get_object(reg[0], reg[1], introspect=False)
            obj.RequestDisconnection(dbus.ObjectPath(self.path), dbus_interface="org.bluez.Profile1",
                                     reply_handler=lambda: None, error_handler=lambda e: None)
        conn.close()

    def connect_profile(self, profile, ok, err):
        if profile == "a2dp":
            self.connect_a2dp(ok, err)
        else:
            self.connect_rfcomm(profile, ok, err)

    def profile_connected(self, profile):
        return self.transport is not None if profile == "a2dp" else profile in self.rfcomm

    # --- whole device ---
    def connect(self, only, ok, err):
        """Connect every profile (or only one), then call ok(); waits for the server's
        registration first (a server just started)."""
        wanted = [p for p in ("hfp", "hsp", "a2dp") if p in self.profiles and (only is None or p == only)
                  and not self.profile_connected(p)]
        t0 = time.monotonic()

        def start():
            if not all(self.sim.ready_for(p) for p in wanted):
                # A server just started registers within a second; one that registered something
                # but not this profile (e.g. HSP: neither PulseAudio 16 nor PipeWire 0.3.65 registers
                # the HSP gateway by default) never will.
                limit = 1 if (self.sim.endpoints or self.sim.profiles) else 10
                if time.monotonic() - t0 > limit:
                    missing = [p for p in wanted if not self.sim.ready_for(p)]
                    err(Error("org.bluez.Error.NotAvailable",
                              "the sound server registered nothing for " + "+".join(missing)))
                    return False
                return True  # poll again
            self.set_props(DEVICE, {"Connected": dbus.Boolean(True)})
            pending = set(wanted)
            errors = []

            def one_done(p, e=None):
                pending.discard(p)
                if e is not None:
                    errors.append("%s: %s" % (p, e))
                if not pending:
                    self.set_props(DEVICE, {"ServicesResolved": dbus.Boolean(True)})
                    log("connected", self.address, "in %.0f ms" % ((time.monotonic() - t0) * 1000), errors)
                    if errors:
                        err(Error("org.bluez.Error.Failed", "; ".join(errors)))
                    else:
                        ok()

            if not pending:
                one_done(None)
            for p in wanted:
                self.connect_profile(p, lambda p=p: one_done(p), lambda e, p=p: one_done(p, e))
            return False

        if start():
            GLib.timeout_add(20, start)

    def disconnect(self, ok, err):
        for p in list(self.rfcomm):
            self.disconnect_rfcomm(p)
        self.clear_a2dp()
        self.set_props(DEVICE, {"ServicesResolved": dbus.Boolean(False), "Connected": dbus.Boolean(False)})
        log("disconnected", self.address)
        ok()

    @dbus.service.method(DEVICE, async_callbacks=("ok", "err"))
    def Connect(self, ok, err):
        self.connect(None, ok, err)

    @dbus.service.method(DEVICE, async_callbacks=("ok", "err"))
    def Disconnect(self, ok, err):
        self.disconnect(ok, err)

    def profile_of(self, uuid):
        return {A2DP_SINK: "a2dp", HFP_HF: "hfp", HSP_HS: "hsp"}.get(str(uuid).lower())

    @dbus.service.method(DEVICE, in_signature="s", async_callbacks=("ok", "err"))
    def ConnectProfile(self, uuid, ok, err):
        p = self.profile_of(uuid)
        log("ConnectProfile", self.address, uuid, p)
        if p is None or p not in self.profiles:
            return err(Error("org.bluez.Error.NotAvailable", "profile not supported"))
        if not self.connected():
            return err(Error("org.bluez.Error.Failed", "Host is down"))  # headset switched off
        if self.profile_connected(p):
            return err(Error("org.bluez.Error.AlreadyConnected", "Already Connected"))
        self.connect(p, ok, err)

    @dbus.service.method(DEVICE, in_signature="s")
    def DisconnectProfile(self, uuid):
        p = self.profile_of(uuid)
        if p == "a2dp":
            self.clear_a2dp()
        elif p:
            self.disconnect_rfcomm(p)

    @dbus.service.method(DEVICE)
    def Pair(self):
        pass

    @dbus.service.method(DEVICE)
    def CancelPairing(self):
        pass


class Sim:
    def __init__(self, bus):
        self.bus = bus
        self.endpoints = []   # {"sender", "path", "uuid", "codec", "caps"}
        self.profiles = {}    # uuid -> (sender, path)
        self.devices = {}     # address -> Device
        self.root = Root(self)
        self.manager = Manager(self)
        self.adapter = Adapter(self)

    def objects(self):
        objs = [self.manager, self.adapter]
        for d in self.devices.values():
            objs += [d] + d.children()
        return objs

    def add_endpoint(self, sender, path, props):
        self.endpoints = [e for e in self.endpoints if (e["sender"], e["path"]) != (sender, path)]
        self.endpoints.append({"sender": sender, "path": path, "uuid": str(props.get("UUID", "")).lower(),
                               "codec": int(props.get("Codec", 255)),
                               "caps": [int(b) for b in props.get("Capabilities", [])]})
        self.registered()

    def registered(self):
        pass

    def source_endpoint(self):
        """The server's SBC A2DP source endpoint, preferring plain SBC (PipeWire also offers
        SBC-XQ with the same codec id)."""
        sbc = [e for e in self.endpoints if e["uuid"] == A2DP_SOURCE and e["codec"] == 0]
        sbc.sort(key=lambda e: (not e["path"].endswith("/sbc"), "xq" in e["path"]))
        return sbc[0] if sbc else None

    def ready_for(self, profile):
        if profile == "a2dp":
            return self.source_endpoint() is not None
        if profile == "hfp":
            return HFP_AG in self.profiles
        if profile == "hsp":
            return HSP_AG in self.profiles
        return False

    def device(self, address):
        d = self.devices.get(str(address).upper())
        if d is None:
            raise Error("org.bluez.Error.DoesNotExist", "no device %s" % address)
        return d

    def add_device(self, address, name, profiles):
        address = address.upper()
        if not re.fullmatch(r"([0-9A-F]{2}:){5}[0-9A-F]{2}", address):
            raise Error("org.bluez.Error.InvalidArguments", "bad address %s" % address)
        if address in self.devices:
            raise Error("org.bluez.Error.AlreadyExists", "device %s exists" % address)
        wanted = set(profiles.split("+"))
        if not wanted or not wanted <= {"a2dp", "hfp", "hsp"}:
            raise Error("org.bluez.Error.InvalidArguments", "profiles: a2dp, hfp, hsp joined by +")
        d = Device(self, address, name, wanted)
        self.devices[address] = d
        self.root.InterfacesAdded(d.path, d.managed())
        if d.remote:
            self.root.InterfacesAdded(d.remote.path, d.remote.managed())
        log("added", address, name, profiles)

    def remove_device(self, address, ok, err):
        d = self.device(address)

        def gone():
            for o in [d.remote, d]:
                if o is not None:
                    self.root.InterfacesRemoved(o.path, dbus.Array(list(o.interfaces), signature="s"))
                    o.remove_from_connection()
            del self.devices[d.address]
            log("removed", d.address)
            ok()

        d.disconnect(gone, err)

    def status(self):
        out = ["endpoints: " + " ".join("%s%s(%s,codec %d)" % (e["sender"], e["path"], e["uuid"][4:8], e["codec"])
                                        for e in self.endpoints),
               "profiles: " + " ".join("%s%s(%s)" % (s, p, u[4:8]) for u, (s, p) in self.profiles.items())]
        for d in self.devices.values():
            line = "device %s %s %s connected=%s" % (d.address, d.interfaces[DEVICE]["Alias"],
                                                     "+".join(sorted(d.profiles)), d.connected())
            if d.transport:
                t = d.transport
                line += " a2dp=%s acquired=%d drained=%d" % (t.interfaces[TRANSPORT]["State"],
                                                              t.acquisitions, t.drained)
            for p, c in d.rfcomm.items():
                line += " %s=%s" % (p, "up" if not c.closed else "closed")
            out.append(line)
        return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--address", required=True, help="the private system bus (unix:path=...)")
    args = ap.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    sim = Sim(bus)
    name = dbus.service.BusName(BLUEZ, bus, do_not_queue=True)  # noqa: F841 (kept alive)
    log("org.bluez on", args.address)
    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, 15, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, 2, loop.quit)
    loop.run()


if __name__ == "__main__":
    main()
