//! Without a GPU (this machine, CI) both devices fail with a clear, typed error — never a panic.
//! On a machine with the GPU, opening it must succeed.

use wavefuse_runtime::{CudaDevice, Device, DeviceError, HipDevice};

#[test]
fn cuda_device_without_driver_is_a_typed_error() {
    match CudaDevice::new(0) {
        Ok(dev) => println!(
            "NVIDIA GPU present: {} ({} SMs)",
            dev.info().name,
            dev.info().compute_units
        ),
        Err(e @ DeviceError::NoDriver { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("no NVIDIA driver found")
                    && text.contains("install the NVIDIA driver"),
                "{text}"
            );
            assert!(matches!(
                CudaDevice::count(),
                Err(DeviceError::NoDriver { .. })
            ));
        }
        Err(e @ DeviceError::NoDevice { .. }) => {
            assert!(e.to_string().contains("no NVIDIA GPU"), "{e}")
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn hip_device_without_gpu_is_a_typed_error() {
    match HipDevice::new(0) {
        Ok(dev) => println!(
            "AMD GPU present: {} ({} CUs)",
            dev.info().name,
            dev.info().compute_units
        ),
        Err(e @ DeviceError::NoDevice { .. }) => {
            let text = e.to_string();
            assert!(text.contains("no AMD GPU/driver found"), "{text}");
            // The driver's own answer is part of the message.
            assert!(
                text.contains("hipInit") || text.contains("hipGetDeviceCount"),
                "{text}"
            );
        }
        Err(e @ DeviceError::NoDriver { .. }) => {
            assert!(e.to_string().contains("libamdhip64"), "{e}")
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn opening_a_device_out_of_range_is_a_typed_error() {
    for r in [
        CudaDevice::new(1 << 20).map(|_| ()),
        HipDevice::new(1 << 20).map(|_| ()),
    ] {
        assert!(
            matches!(
                r,
                Err(DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. })
            ),
            "{r:?}"
        );
    }
}
